package kvcache

import (
	"container/list"
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// Partial last blocks ("tails"). A prefix cache holds whole blocks only: a
// block still being filled cannot be shared without someone writing into a
// shared block. So when a prompt that a finished sequence already ran comes
// again, its match stops at the last block boundary, and the tokens after
// it — up to BlockSize-1 of them — are computed again. A llama-server slot,
// which keeps every token it ran, computes only the last one.
//
// The pool closes that gap without touching any design. When a sequence
// ends, the pool keeps its partial last block (the KV rows of its committed
// tokens after the last boundary) in a small store, under the salt and the
// tokens before it. A sequence that opens and whose match ends at exactly
// that boundary, after the same tokens, takes the kept block as its next
// page, and the leading tokens its prompt shares with the kept ones count
// as cached. The block is then shared, so "no write into a shared block"
// holds by the pool's copy-on-write: before the new sequence writes its
// own rows after the shared ones, PrepareWrite gives it a copy, and the
// store's block stays as it was for the next hit.
//
// A kept block is the cheapest thing the pool holds: it saves fewer than a
// block's worth of tokens, for prompts that continue one exact prefix. So
// the store is bounded (Config.TailBlocks, least recently used out first),
// and the pool gives its blocks back before asking the cache to evict.

// tailStore is the pool's set of kept partial blocks.
//
// Invariants: byKey and lru hold the same entries; each entry holds one
// allocator reference on its block, and len(byKey) ≤ max.
type tailStore struct {
	max   int
	seed  maphash.Seed
	byKey map[tailKey]*list.Element // of *tail
	lru   *list.List                // front: most recently kept or hit
	buf   []byte                    // scratch for hashing a prefix

	stats TailStats
}

// tailKey names the tokens before a tail: the salt and a hash of them.
// Two prefixes may share a hash; an entry also keeps its prefix and a
// lookup compares it, so a collision is a miss, never another prompt's KV.
type tailKey struct {
	salt string
	hash uint64
}

// tail is one kept partial block.
type tail struct {
	key    tailKey
	prefix []int32 // the tokens before the block (a whole number of blocks)
	tokens []int32 // the tokens whose KV the block's leading rows hold
	block  int32
}

// TailStats are what the pool did with partial last blocks.
type TailStats struct {
	Kept   int // blocks kept when their sequence ended
	Held   int // kept blocks held now
	Hits   int // sequences that opened with a copy of one
	Tokens int // prompt tokens those copies spared computing
}

func newTailStore(max int) *tailStore {
	return &tailStore{max: max, seed: maphash.MakeSeed(), byKey: map[tailKey]*list.Element{}, lru: list.New()}
}

// key hashes salt and prefix.
func (t *tailStore) key(salt string, prefix []int32) tailKey {
	t.buf = t.buf[:0]
	for _, tok := range prefix {
		t.buf = binary.LittleEndian.AppendUint32(t.buf, uint32(tok))
	}
	return tailKey{salt: salt, hash: maphash.Bytes(t.seed, t.buf)}
}

// find returns the tail kept after exactly prefix under salt, or nil.
func (t *tailStore) find(salt string, prefix []int32) *list.Element {
	el := t.byKey[t.key(salt, prefix)]
	if el == nil || !slices.Equal(el.Value.(*tail).prefix, prefix) {
		return nil
	}
	return el
}

// shared returns how many leading tokens of rest the tail kept after
// prefix under salt holds KV for (0 if none is kept), and its element.
func (t *tailStore) shared(salt string, prefix, rest []int32) (int, *list.Element) {
	el := t.find(salt, prefix)
	if el == nil {
		return 0, nil
	}
	kept := el.Value.(*tail).tokens
	n := 0
	for n < len(kept) && n < len(rest) && kept[n] == rest[n] {
		n++
	}
	return n, el
}

// put keeps block as the tail of prefix under salt, taking over the
// caller's allocator reference on it. It returns the blocks whose
// references the store let go of (an older tail of the same prefix, the
// least recently used ones over max): the caller decrefs them.
func (t *tailStore) put(salt string, prefix, tokens []int32, block int32) (drop []int32) {
	k := t.key(salt, prefix)
	if el := t.byKey[k]; el != nil {
		// The newest run of a prefix replaces the older one (a collision
		// of two prefixes too: the store keeps one tail per key).
		drop = append(drop, t.remove(el))
	}
	e := &tail{key: k, prefix: slices.Clone(prefix), tokens: slices.Clone(tokens), block: block}
	t.byKey[k] = t.lru.PushFront(e)
	t.stats.Kept++
	for len(t.byKey) > t.max {
		drop = append(drop, t.remove(t.lru.Back()))
	}
	return drop
}

// remove forgets el and returns its block, whose reference is now the
// caller's to drop.
func (t *tailStore) remove(el *list.Element) int32 {
	e := t.lru.Remove(el).(*tail)
	delete(t.byKey, e.key)
	return e.block
}

// freeable returns how many kept blocks giving back would free: those no
// open sequence shares.
func (t *tailStore) freeable(a *Allocator) int {
	n := 0
	for el := t.lru.Front(); el != nil; el = el.Next() {
		if a.Refs(el.Value.(*tail).block) == 1 {
			n++
		}
	}
	return n
}

// holds returns the references the store holds, per block (for Audit).
func (t *tailStore) holds() map[int32]int {
	m := make(map[int32]int, t.lru.Len())
	for el := t.lru.Front(); el != nil; el = el.Next() {
		m[el.Value.(*tail).block]++
	}
	return m
}

// keepTails is Release's side of the store. Two blocks of an ending
// sequence are worth keeping: the one its prompt ends in (the same prompt
// again matches up to that block; its own output may have filled and
// cached it, but the new prompt shares only its leading rows) and the one
// its committed tokens end in (the next turn of a conversation continues
// all of them). For each that ends inside a block, the store keeps the
// block: the pool's own reference when the sequence alone holds it,
// else a private copy if a block is free (a tail never evicts anything).
// It returns the pages whose references the store took over, so Release
// does not drop those.
func (p *Pool) keepTails(id int, s *seqPages) (taken []int) {
	if p.tails == nil {
		return nil
	}
	bs := p.blockSize
	done := -1
	for _, end := range [2]int{min(len(s.prompt), len(s.committed)), len(s.committed)} {
		page := end / bs
		if end%bs == 0 || page == done || page >= len(s.pages) {
			continue
		}
		done = page
		b := s.pages[page]
		if page < s.lent || p.alloc.Refs(b) > 1 {
			var ok bool
			if b, ok = p.copyFree(b); !ok {
				continue
			}
		} else {
			taken = append(taken, page)
		}
		tokens := s.committed[page*bs : min(len(s.committed), page*bs+bs)]
		for _, d := range p.tails.put(s.salt, s.committed[:page*bs], tokens, b) {
			p.alloc.Decref(d)
		}
		if p.tr != nil {
			p.tr.PoolEvent(TraceEvent{Op: TraceTailKeep, Seq: id, Tokens: len(tokens), Blocks: []int32{b}})
		}
	}
	return taken
}

// copyFree copies block src into a free block, if there is one, without
// evicting anything, and returns the copy with one reference.
func (p *Pool) copyFree(src int32) (int32, bool) {
	if !p.alloc.CanAllocate(1) {
		return 0, false
	}
	fresh, _ := p.alloc.Allocate(nil, 1)
	p.copyRows(src, fresh[0])
	return fresh[0], true
}

// copyRows copies every layer's K and V rows of block src into dst.
func (p *Pool) copyRows(src, dst int32) {
	for l := range p.k {
		if !p.LocalLayer(l) {
			p.be.CopyBlock(p.k[l], p.v[l], src, dst, p.blockSize)
		}
	}
}

// tailHit is Open's side of the store: when the match of sequence s ends
// at a block boundary, cached tokens in, and a tail is kept after exactly
// those tokens, s takes the kept block as its next page. It returns how
// many more tokens are cached.
//
// The block is shared, not copied here: the store keeps its reference, so
// the block has two holders, and PrepareWrite copies it before s writes
// its first row, as it does a forked sample's last block. The store's KV
// stays as it was for the next hit, and Open needs no free block.
func (p *Pool) tailHit(id int, s *seqPages, prompt []int32, cached int) int {
	bs := p.blockSize
	if p.tails == nil || cached%bs != 0 || len(s.pages) != cached/bs {
		return 0
	}
	n, el := p.tails.shared(s.salt, prompt[:cached], prompt[cached:])
	if n == 0 {
		return 0
	}
	b := el.Value.(*tail).block
	p.alloc.Incref(b)
	s.pages = append(s.pages, b)
	p.tails.lru.MoveToFront(el)
	p.tails.stats.Hits++
	p.tails.stats.Tokens += n
	if p.tr != nil {
		p.tr.PoolEvent(TraceEvent{Op: TraceTailHit, Seq: id, Tokens: n, Blocks: []int32{b}})
	}
	return n
}

// tailMatchLen is what tailHit would add, with no side effects.
func (p *Pool) tailMatchLen(salt string, tokens []int32, cached int) int {
	if p.tails == nil || cached%p.blockSize != 0 || cached > len(tokens) {
		return 0
	}
	n, _ := p.tails.shared(salt, tokens[:cached], tokens[cached:])
	return n
}

// freeTails gives back kept tails, least recently used first, until n
// blocks are free or none is left that no sequence shares (giving back a
// shared one frees nothing), and returns how many blocks that freed.
func (p *Pool) freeTails(n int) int {
	if p.tails == nil {
		return 0
	}
	freed := 0
	for el := p.tails.lru.Back(); el != nil && freed < n; {
		prev := el.Prev()
		if p.alloc.Refs(el.Value.(*tail).block) == 1 {
			p.alloc.Decref(p.tails.remove(el))
			freed++
		}
		el = prev
	}
	return freed
}

// dropTailOf gives back the kept tail whose block is b, if there is one.
func (p *Pool) dropTailOf(b int32) bool {
	if p.tails == nil {
		return false
	}
	for el := p.tails.lru.Front(); el != nil; el = el.Next() {
		if el.Value.(*tail).block == b {
			p.alloc.Decref(p.tails.remove(el))
			return true
		}
	}
	return false
}

// TailStats reports what the pool did with partial last blocks (zero
// without Config.TailBlocks).
func (p *Pool) TailStats() TailStats {
	if p.tails == nil {
		return TailStats{}
	}
	st := p.tails.stats
	st.Held = p.tails.lru.Len()
	return st
}

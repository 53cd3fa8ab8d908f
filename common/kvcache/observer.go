package kvcache

import (
	"slices"
	"sync"

	"kvlab/common/kvevents"
)

// Observer turns what the prefix cache holds into KV events, whatever design
// the cache is: it never asks the design anything but Holds.
//
// After every Commit it walks the committed sequence's full blocks, each
// named by its chained vLLM block hash (its kvevents.Hasher: vLLM's
// algorithm, root and LoRA name), salted with the sequence's cache salt as
// vLLM salts it (the first block's extra keys): two tenants' equal prompts
// are different hashes, as they are different cache entries; a block the cache now holds
// (Holds > 0) that carries a hash not announced yet is announced with a
// BlockStored. A hash stays announced while at least one block the cache
// holds carries it (two sequences that computed the same prefix at once
// may leave two copies). When the allocator frees such a block, or the
// cache lets go of it while a sequence still owns it, the block stops
// counting, and the hash's last block going is a BlockRemoved.
//
// The pool drives the observer on the engine's goroutine. Events wait in a
// queue until Drain takes them (another goroutine may: the queue and the
// announced set are behind a mutex), and Ready signals when there are some.
// A pool without an observer pays nothing.
type Observer struct {
	pool   *Pool
	hasher kvevents.Hasher

	// Engine goroutine only.
	seqs  map[int][]kvevents.Hash // hashes of each open sequence's committed full blocks
	dirty []int32                 // announced blocks decref'd but not freed, to check

	mu      sync.Mutex
	entries map[kvevents.Hash]*announced
	byBlock []*announced // the entry block b counts for, nil if none
	pending []kvevents.Event
	run     runState // the BlockStored being extended during one commit
	ready   chan struct{}

	// quiet: no one reads events (the observer names blocks for the
	// tiers only), so none are queued.
	quiet bool
	// demote, when set (AttachTiers), copies a block the allocator has
	// just freed, the last one carrying its hash, to the tiers.
	demote func(e *announced, b int32)
	// The cache tiers' events (TierEvents), queued under a lock of their
	// own: a tier reports from inside a demotion, with mu held, and a
	// disk tier's writer from its own goroutine. Lock order: mu, then tmu.
	tmu         sync.Mutex
	tierPending []kvevents.Event
	tiers       []TierEvents
}

// tierEvent queues a cache tier's event (the tiers' sink).
func (o *Observer) tierEvent(ev kvevents.Event) {
	if o.quiet {
		return
	}
	o.tmu.Lock()
	o.tierPending = append(o.tierPending, ev)
	o.tmu.Unlock()
	o.signal()
}

// announced is one hash the cache holds.
type announced struct {
	hash   kvevents.Hash
	parent *kvevents.Hash // nil for the first block of a chain
	tokens []int32
	depth  int     // block index in its chain
	blocks []int32 // the blocks the cache holds that carry this hash
	salted bool    // committed by a sequence with a cache salt
}

// runState lets consecutive new blocks of one commit share one BlockStored,
// as vLLM's events do.
type runState struct {
	event int // index in pending, -1 for none
	next  int // the block index that would extend it
}

// Observe attaches a new observer to p that names blocks as a vLLM replica
// running sha256_cbor with PYTHONHASHSEED=seed does: ObserveWith a
// kvevents.NewHasher(kvevents.SHA256CBOR, seed, "").
func (p *Pool) Observe(seed string) *Observer {
	return p.ObserveWith(kvevents.NewHasher(kvevents.SHA256CBOR, seed, ""))
}

// ObserveWith attaches a new observer to p, naming blocks with h: its
// algorithm, its root (vLLM's NONE_HASH) and its LoRA name. It returns nil
// when p has no prefix cache: nothing is ever cached, so nothing is
// announced. Attach it before the first sequence opens.
func (p *Pool) ObserveWith(h kvevents.Hasher) *Observer {
	if p.cache == nil {
		return nil
	}
	if o := p.obs; o != nil && o.quiet {
		// The tiers' observer (AttachTiers came first): it names blocks
		// as asked from now on, and queues their events.
		o.hasher, o.quiet = h, false
		return o
	}
	o := &Observer{
		pool:    p,
		hasher:  h,
		seqs:    make(map[int][]kvevents.Hash),
		entries: make(map[kvevents.Hash]*announced),
		byBlock: make([]*announced, p.alloc.Total()),
		ready:   make(chan struct{}, 1),
		run:     runState{event: -1},
	}
	p.obs = o
	p.alloc.onDecref = o.decref
	return o
}

// Observer returns the pool's observer, or nil.
func (p *Pool) Observer() *Observer { return p.obs }

// Hasher returns how the observer names blocks.
func (o *Observer) Hasher() kvevents.Hasher { return o.hasher }

// Ready is signalled when events are waiting for Drain.
func (o *Observer) Ready() <-chan struct{} { return o.ready }

// Drain returns the events queued since the last Drain and empties the
// queue. With state, it also returns the whole announced set as events: an
// AllBlocksCleared followed by one BlockStored per announced block,
// parents first. Both come from one instant, so a subscriber that applies
// the state and then every later Drain's events sees exactly the cache.
func (o *Observer) Drain(state bool) (events, snapshot []kvevents.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	events, o.pending = o.pending, nil
	o.run = runState{event: -1}
	o.tmu.Lock()
	events, o.tierPending = append(events, o.tierPending...), nil
	o.tmu.Unlock()
	if state {
		snapshot = o.stateLocked()
		for _, t := range o.tiers { // after tmu: a tier takes its own lock
			snapshot = append(snapshot, t.StoredEvents()...)
		}
	}
	return events, snapshot
}

func (o *Observer) stateLocked() []kvevents.Event {
	es := o.sortedLocked()
	out := make([]kvevents.Event, 0, 1+len(es))
	out = append(out, kvevents.Event{Type: kvevents.AllBlocksCleared})
	for _, e := range es {
		out = append(out, e.stored(o.pool.blockSize))
	}
	return out
}

// sortedLocked returns the announced entries, parents first.
func (o *Observer) sortedLocked() []*announced {
	es := make([]*announced, 0, len(o.entries))
	for _, e := range o.entries {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *announced) int {
		if a.depth != b.depth {
			return a.depth - b.depth
		}
		return slices.Compare(a.hash[:], b.hash[:]) // a stable order for tests and diffs
	})
	return es
}

func (e *announced) stored(bs int) kvevents.Event {
	return kvevents.Event{Type: kvevents.BlockStored, BlockHashes: []kvevents.Hash{e.hash}, ParentBlockHash: e.parent, TokenIDs: e.tokens, BlockSize: bs}
}

// Announced reports how many distinct hashes are announced now.
func (o *Observer) Announced() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.entries)
}

// CachedBlock is one announced block, for what reads the cache's contents
// (the persistent tier).
type CachedBlock struct {
	Hash   kvevents.Hash
	Parent *kvevents.Hash
	Tokens []int32 // shared with the observer: do not modify
	Block  int32   // a physical block holding its KV when it was listed
	// Salted marks a block of a chain committed under a cache salt. Its
	// hash proves the salt only to whoever knows the salt; what copies
	// the cache elsewhere must not hand it to an unsalted reader.
	Salted bool
}

// Visit calls fn with every announced block, parents first, while holding
// the observer's lock: the engine cannot free an announced block (its free
// waits for the lock) until Visit returns, so fn may read the block's KV
// even while the engine runs. fn must not call back into the observer. The
// engine waits for all of fn's calls: what may be slow (a disk) belongs in
// Blocks and Read instead.
func (o *Observer) Visit(fn func(CachedBlock) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.sortedLocked() {
		if err := fn(e.cached()); err != nil {
			return err
		}
	}
	return nil
}

// Blocks returns every announced block, parents first, as of one instant.
// It holds the observer's lock only to copy the metadata (a CachedBlock per
// block, 72 bytes on a 64-bit machine, sharing the entry's tokens, which
// never change; sorting takes a pointer per block more), so a reader of
// the cache's contents can walk the list at its own pace and read each
// block's KV through Read, the engine waiting for one block at a time.
func (o *Observer) Blocks() []CachedBlock {
	o.mu.Lock()
	defer o.mu.Unlock()
	es := o.sortedLocked()
	out := make([]CachedBlock, len(es))
	for i, e := range es {
		out[i] = e.cached()
	}
	return out
}

// Read calls fn with a physical block that holds b's KV now, while holding
// the observer's lock, so the block cannot be freed and reused until fn
// returns. b is a block from Blocks, which may have been evicted since: if
// no block the cache holds carries b.Hash any more, Read returns false
// without calling fn. The hash may have moved to another block (b's was
// freed and the same prefix computed again); fn gets that one. fn should
// only copy the block's KV: the engine's frees and commits wait for it. It
// must not call back into the observer.
func (o *Observer) Read(b CachedBlock, fn func(block int32) error) (ok bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entries[b.Hash]
	if e == nil {
		return false, nil
	}
	return true, fn(e.blocks[0])
}

func (e *announced) cached() CachedBlock {
	return CachedBlock{Hash: e.hash, Parent: e.parent, Tokens: e.tokens, Block: e.blocks[0], Salted: e.salted}
}

func (o *Observer) signal() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// extend appends to hs, the hashes of the first whole blocks of tokens
// under salt, those of the blocks after them up to the first n.
func (o *Observer) extend(hs []kvevents.Hash, salt string, tokens []int32, n int) []kvevents.Hash {
	bs := o.pool.blockSize
	for i := len(hs); i < n; i++ {
		block := tokens[i*bs : (i+1)*bs]
		if i == 0 {
			hs = append(hs, o.hasher.First(block, salt))
		} else {
			hs = append(hs, o.hasher.Next(hs[i-1], block))
		}
	}
	return hs
}

// open and release forget a sequence's hashes: an id may come back as
// another sequence, with another salt.
func (o *Observer) open(id int) { delete(o.seqs, id) }

func (o *Observer) release(id int) {
	delete(o.seqs, id)
	o.settle()
}

// commit announces the blocks of sequence id's committed tokens that the
// cache holds now and that carry a hash not announced yet. salt is the
// sequence's cache salt: it enters the first block's hash only, and every
// later block inherits it through its parent.
func (o *Observer) commit(id int, salt string, tokens []int32, pages []int32) {
	bs := o.pool.blockSize
	hs := o.extend(o.seqs[id], salt, tokens, min(len(tokens)/bs, len(pages)))
	o.seqs[id] = hs
	o.settle()
	cache := o.pool.cache
	o.mu.Lock()
	added := false
	for i, h := range hs {
		b := pages[i]
		if o.byBlock[b] != nil || cache.Holds(b) == 0 {
			continue
		}
		e := o.entries[h]
		if e == nil {
			e = &announced{hash: h, tokens: slices.Clone(tokens[i*bs : (i+1)*bs]), depth: i, salted: salt != ""}
			if i > 0 {
				p := hs[i-1]
				e.parent = &p
			}
			o.entries[h] = e
			if !o.quiet {
				o.storedLocked(e, i)
				added = true
			}
		}
		e.blocks = append(e.blocks, b)
		o.byBlock[b] = e
	}
	o.run = runState{event: -1}
	o.mu.Unlock()
	if added {
		o.signal()
	}
}

// storedLocked queues e's BlockStored, extending the previous event when e
// continues its chain.
func (o *Observer) storedLocked(e *announced, i int) {
	if r := o.run; r.event >= 0 && r.next == i {
		ev := &o.pending[r.event]
		ev.BlockHashes = append(ev.BlockHashes, e.hash)
		ev.TokenIDs = append(ev.TokenIDs, e.tokens...)
	} else {
		ev := e.stored(o.pool.blockSize)
		ev.BlockHashes = slices.Clone(ev.BlockHashes)
		ev.TokenIDs = slices.Clone(ev.TokenIDs)
		o.pending = append(o.pending, ev)
		o.run.event = len(o.pending) - 1
	}
	o.run.next = i + 1
}

// decref is the allocator's hook, called on every Decref. A freed block
// stops counting at once: it may be handed out again before anything else
// runs. A block still allocated is only noted; whether the cache still
// holds it is asked once the cache's call has returned (settle), since
// mid-call a design's Holds may not be up to date.
func (o *Observer) decref(b int32, freed bool) {
	if o.byBlock[b] == nil {
		return
	}
	if freed {
		o.mu.Lock()
		if e := o.byBlock[b]; o.demote != nil && len(e.blocks) == 1 {
			o.demote(e, b)
		}
		o.dropLocked(b)
		o.mu.Unlock()
		o.signal()
		return
	}
	o.dirty = append(o.dirty, b)
}

// settle drops the noted blocks the cache no longer holds.
func (o *Observer) settle() {
	if len(o.dirty) == 0 {
		return
	}
	dropped := false
	o.mu.Lock()
	for _, b := range o.dirty {
		if o.byBlock[b] != nil && o.pool.cache.Holds(b) == 0 {
			o.dropLocked(b)
			dropped = true
		}
	}
	o.mu.Unlock()
	o.dirty = o.dirty[:0]
	if dropped {
		o.signal()
	}
}

// dropLocked stops counting block b; a hash left with no block is removed.
func (o *Observer) dropLocked(b int32) {
	e := o.byBlock[b]
	o.byBlock[b] = nil
	if i := slices.Index(e.blocks, b); i >= 0 {
		e.blocks = slices.Delete(e.blocks, i, i+1)
	}
	if len(e.blocks) > 0 {
		return
	}
	delete(o.entries, e.hash)
	if o.quiet {
		return
	}
	if n := len(o.pending); n > 0 && o.pending[n-1].Type == kvevents.BlockRemoved {
		o.pending[n-1].BlockHashes = append(o.pending[n-1].BlockHashes, e.hash)
		return
	}
	o.pending = append(o.pending, kvevents.Event{Type: kvevents.BlockRemoved, BlockHashes: []kvevents.Hash{e.hash}})
	o.run = runState{event: -1}
}

// Package ghost answers "what would another eviction policy have saved on
// this traffic?" while the real prefix cache serves it.
//
// A Tap wraps a real kvcache.PrefixCache. It is one itself: every call goes
// to the real cache unchanged and the real answer comes back, so the pool
// and the engine behave exactly as without it. It also mirrors the calls
// into ghost caches, each with its own eviction policy (LRU, LFU, SLRU, ARC,
// TensorRT-LLM's priorities): metadata only, salted block chain keys with
// the counts, recency and frequency the policies rank by, and no KV, no
// allocator. Each Match counts the tokens every ghost would have found next
// to what the real cache found.
//
// A ghost feels the real cache's pressure. When the pool asks the real
// cache to Evict(n), each ghost frees n blocks of its own by its own
// policy, among the blocks no live sequence uses as the ghost tracks them
// through Match, Insert and Release. A ghost that missed where the real
// cache hit caches blocks the real pool never had to find room for; it
// makes that room itself, so that it never holds more than its pool could
// (cache.fit).
//
// A ghost runs the radix tree's bookkeeping, so the LRU ghost makes the
// radix tree's every decision and reports exactly its hits
// (TestGhostLRUIsTheRadixTree, TestGhostLRUIsTheRadixTreeOnEngineTraces).
// What a ghost reports is what its policy would have hit on the traffic
// the real cache shaped: the requests, their order and their timing are
// the real run's, and no ghost can change which request the scheduler
// admits next or which one a full pool preempts.
//
// The seam does not show everything a pool does: a forked sample's
// references and the tiers' promotions pass it by. A ghost counts only
// what the prefix cache itself found, and frees a block on eviction unless
// its writer still holds it, never knowing that a forked sample does.
//
// Wrap puts a Tap around every cache a builder makes (engine.Config's
// PrefixCache) and returns a Board whose Report any goroutine may read.
package ghost

import (
	"cmp"
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"

	"kvlab/common/kvcache"
)

// Builder builds a prefix cache over an allocator: the type of
// engine.Config.PrefixCache and kvcache.Config.NewCache.
type Builder = func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache

// Config says which ghosts a Tap runs.
type Config struct {
	// Policies are the ghosts, one per policy, reported in this order.
	Policies []Policy
	// Real names the real cache's row in a Report; "" is "real".
	Real string
	// Now is the clock the priority policy's durations run on; nil is
	// time.Now. Tests give a fake one.
	Now func() time.Time
	// OnMatch, when set, is told every Match's result, on the goroutine
	// that called Match, after the ghosts have matched.
	OnMatch func(MatchEvent)
}

// MatchEvent is one Match as a Tap saw it.
type MatchEvent struct {
	Seq    int    // the pool's sequence id
	Salt   string // the request's cache salt
	Tokens int    // the prompt's length
	Real   int    // tokens the real cache found
	// Ghosts holds the tokens each ghost found, in Config.Policies order.
	// The slice is the Tap's own and valid only during the call.
	Ghosts []int
}

// Tap is a PrefixCache that forwards every call to a real cache and
// mirrors the traffic into ghost caches. Like the caches it wraps, it is
// for the one goroutine that drives the pool; only Report may be called
// from others.
type Tap struct {
	real    kvcache.PrefixCache
	bs      int
	ghosts  []*cache
	onMatch func(MatchEvent)

	seqs     map[int]*seqKeys
	spare    []*seqKeys
	capacity int   // the pool's blocks
	pages    int   // the live sequences' pages, summed (seqKeys.pages)
	found    []int // OnMatch's scratch

	mu   sync.Mutex // guards snap
	snap Report
}

// seqKeys is a live sequence's salt and the chain keys of its whole blocks
// hashed so far: the prompt Match saw, then what Insert added. The pool
// commits longer and longer prefixes of one token run per sequence (the
// seam's contract), so each block is hashed once.
type seqKeys struct {
	salt string
	keys []uint64
	// pending says that the sequence's last Match is not counted yet:
	// what it found (real, found) for a prompt of tokens is counted at
	// its first Insert, and dropped if the sequence is released before
	// one, an admission the pool could not grow and gave back at once.
	pending bool
	tokens  int
	real    int
	found   []int
	// pages is the longest page table an Insert showed for the sequence.
	pages int
}

var _ kvcache.PrefixCache = (*Tap)(nil)

// NewTap wraps real, a cache of blockSize-token blocks over a pool of
// capacity blocks, with one ghost per policy of cfg. The capacity sizes
// ARC and SLRU and bounds what a ghost holds (0: no bound, and no room for
// ARC's histories or SLRU's protected segment).
func NewTap(real kvcache.PrefixCache, blockSize, capacity int, cfg Config) *Tap {
	if blockSize <= 0 {
		panic(fmt.Sprintf("ghost: block size must be positive, have %d", blockSize))
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	e := env{capacity: capacity, now: now, start: now()}
	t := &Tap{real: real, bs: blockSize, capacity: capacity, onMatch: cfg.OnMatch, seqs: map[int]*seqKeys{}}
	t.snap.Rows = make([]Row, 1+len(cfg.Policies))
	t.snap.Rows[0].Name = cmp.Or(cfg.Real, "real")
	for i, p := range cfg.Policies {
		if p.build == nil {
			panic("ghost: a Policy must come from LRU, LFU, SLRU, ARC or Priority")
		}
		c := newCache(p.Name, blockSize)
		c.ev = p.build(c, e)
		t.ghosts = append(t.ghosts, c)
		t.snap.Rows[1+i].Name = p.Name
	}
	t.found = make([]int, len(t.ghosts))
	return t
}

// Real returns the wrapped cache.
func (t *Tap) Real() kvcache.PrefixCache { return t.real }

// Match asks the real cache, then every ghost, and returns the real answer.
func (t *Tap) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	blocks, matched := t.real.Match(seq, salt, tokens)
	s := t.open(seq, salt)
	keys := t.keys(s, tokens)
	for i, g := range t.ghosts {
		g.ev.opened(seq, salt, tokens)
		t.found[i] = g.match(seq, keys)
	}
	s.pending, s.tokens, s.real = true, len(tokens), matched
	s.found = append(s.found[:0], t.found...)
	if t.onMatch != nil {
		t.onMatch(MatchEvent{Seq: seq, Salt: salt, Tokens: len(tokens), Real: matched, Ghosts: t.found})
	}
	return blocks, matched
}

// MatchLen asks the real cache only: it has no side effects to mirror.
func (t *Tap) MatchLen(salt string, tokens []int32) int { return t.real.MatchLen(salt, tokens) }

// Insert offers the blocks to the real cache, then to every ghost, and
// returns the real cache's lent count.
func (t *Tap) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	newLent := t.real.Insert(seq, salt, tokens, pages, lent)
	s, ok := t.seqs[seq]
	if !ok { // a sequence that never matched (a forked sample)
		s = t.open(seq, salt)
	}
	keys := t.keys(s, tokens)[:len(tokens)/t.bs]
	if len(pages) > s.pages {
		t.pages += len(pages) - s.pages
		s.pages = len(pages)
	}
	for _, g := range t.ghosts {
		g.insert(seq, keys, len(pages))
		g.fit(t.capacity, t.pages)
	}
	t.publish(s)
	return newLent
}

// Release ends seq in the real cache and in every ghost.
func (t *Tap) Release(seq int) {
	t.real.Release(seq)
	for _, g := range t.ghosts {
		g.release(seq)
	}
	if s, ok := t.seqs[seq]; ok {
		delete(t.seqs, seq)
		t.pages -= s.pages
		s.keys, s.pending, s.pages = s.keys[:0], false, 0
		t.spare = append(t.spare, s)
	}
}

// Evict evicts n blocks from the real cache, and n from every ghost by its
// own policy, and returns what the real cache freed.
func (t *Tap) Evict(n int) int {
	freed := t.real.Evict(n)
	for _, g := range t.ghosts {
		g.evict(n)
	}
	t.publish(nil)
	return freed
}

// Evictable, Holds and Stats are the real cache's.
func (t *Tap) Evictable() int            { return t.real.Evictable() }
func (t *Tap) Holds(b int32) int         { return t.real.Holds(b) }
func (t *Tap) Stats() kvcache.CacheStats { return t.real.Stats() }

// AuditCache runs the real cache's own audit, if it has one, then checks
// every ghost's books against a recount, so that the conformance suite,
// which audits after every step, checks the ghosts too. It costs O(blocks)
// per ghost.
func (t *Tap) AuditCache() error {
	if a, ok := t.real.(interface{ AuditCache() error }); ok {
		if err := a.AuditCache(); err != nil {
			return err
		}
	}
	for _, g := range t.ghosts {
		if err := g.audit(); err != nil {
			return err
		}
	}
	return nil
}

// Dump draws the real cache, when it can (kvcache.Dumper).
func (t *Tap) Dump(w io.Writer) {
	if d, ok := t.real.(kvcache.Dumper); ok {
		d.Dump(w)
	}
}

// open starts seq's chain keys under salt.
func (t *Tap) open(seq int, salt string) *seqKeys {
	s, ok := t.seqs[seq]
	if !ok {
		if k := len(t.spare); k > 0 {
			s, t.spare = t.spare[k-1], t.spare[:k-1]
		} else {
			s = &seqKeys{}
		}
		t.seqs[seq] = s
	}
	s.salt, s.keys, s.pending = salt, s.keys[:0], false
	return s
}

// keys returns s's chain keys, extended to cover tokens' whole blocks.
func (t *Tap) keys(s *seqKeys, tokens []int32) []uint64 {
	for i := len(s.keys); (i+1)*t.bs <= len(tokens); i++ {
		prev := rootKey(s.salt)
		if i > 0 {
			prev = s.keys[i-1]
		}
		s.keys = append(s.keys, chainKey(prev, tokens[i*t.bs:(i+1)*t.bs]))
	}
	return s.keys
}

// publish copies the counters into the report others read, counting s's
// pending Match first, if any.
func (t *Tap) publish(s *seqKeys) {
	t.mu.Lock()
	if s != nil && s.pending {
		s.pending = false
		t.snap.Matches++
		t.snap.Queried += int64(s.tokens)
		t.snap.Rows[0].Hits += int64(s.real)
		for i, n := range s.found {
			t.snap.Rows[1+i].Hits += int64(n)
		}
	}
	rs := t.real.Stats()
	t.snap.Rows[0].Evicted, t.snap.Rows[0].Cached = int64(rs.Evicted), rs.Blocks
	for i, g := range t.ghosts {
		r := &t.snap.Rows[1+i]
		r.Evicted, r.Cached = g.evicted, g.cached
	}
	t.mu.Unlock()
}

// Report returns the Tap's counters so far. Any goroutine may call it.
func (t *Tap) Report() Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.snap
	r.Rows = append([]Row(nil), t.snap.Rows...)
	r.rates()
	return r
}

// saltSeed keeps a salt's root key apart from any chain key.
const saltSeed = 0x5a17_5a17_5a17_5a17

// rootKey is the key a salt's chains start from: the unsalted root, or a
// hash of the salt, so that no chain under one salt meets one under
// another (but for a 64-bit collision).
func rootKey(salt string) uint64 {
	if salt == "" {
		return 0
	}
	return xxh3.HashStringSeed(salt, saltSeed) | 1 // never the unsalted root
}

// chainKey is the key of block under the prefix keyed prev: a hash of the
// block's tokens seeded with prev, so that it names the whole salted
// prefix.
func chainKey(prev uint64, block []int32) uint64 {
	return xxh3.HashSeed(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(block))), 4*len(block)), prev)
}

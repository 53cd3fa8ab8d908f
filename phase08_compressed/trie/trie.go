// Package trie is a prefix cache for the KV pool: a compressed radix trie
// whose nodes hold runs of tokens together with the KV blocks of those
// tokens, so a new prompt that starts like an old one reuses the old KV
// instead of computing it again.
//
// Three rules shape it.
//
//   - Block alignment. Every node holds a whole number of blocks, and a
//     match is rounded DOWN to a block boundary: a block is shared only if
//     every token in it agrees.
//   - One lookup per level. Children are keyed by their first block, so a
//     descent costs one map lookup and one comparison of token runs.
//   - One reference count. The allocator's count on a block is the number
//     of live sequences holding it plus one if a node lists it. Match
//     increfs every block it lends, Release decrefs them, Insert increfs the
//     blocks of the nodes it creates and adopts nothing, and eviction
//     decrefs blocks nobody else holds. No ownership counter lives in the
//     nodes (their use counts are history, for the Priority policy).
//
// A request's cache salt picks the trie it lives in: there is one root per
// salt, the unsalted root being the "" salt's, and a descent, a split, a
// merge or an eviction never crosses from one root's subtree into
// another's, so tenants never share a block (docs/phase08_compressed.md,
// "Tenants").
//
// A Trie implements kvcache.PrefixCache; the pool is its only caller.
package trie

import (
	"fmt"

	"kvlab/common/kvcache"
)

// Trie is a compressed radix trie of cached token runs. The zero value is
// not usable; call New. A Trie is not safe for concurrent use: the pool
// that owns it is driven by one goroutine.
type Trie struct {
	alloc  *kvcache.Allocator
	bs     int    // tokens per block
	policy Policy // which evictable leaf loses blocks first
	root   *node  // the unsalted root: holds no tokens and is never evicted
	// salted holds the root of each other salt's trie. A salted root goes
	// once its last child does, so a salt no longer used costs nothing.
	salted map[string]*node

	// holds[b] counts the allocator references on block b that the trie
	// took: one if a node lists b, plus one per sequence b is lent to.
	holds []int32
	// lent[seq] lists the blocks Match increfed for seq; Release drops
	// exactly these, so a reference is never dropped twice or never.
	lent map[int][]int32
	// spare holds emptied lent lists for reuse: a steady-state Match
	// allocates nothing.
	spare [][]int32
	// tokens and runs hand out the nodes' token and block runs from
	// shared chunks, which the collector marks far fewer of (arena.go).
	tokens, runs arena

	clock   int64 // logical time, advanced by Match and Insert, for LRU
	blocks  int   // blocks listed by nodes
	evicted int   // blocks freed by Evict so far
	queried int   // prompt tokens passed to Match
	found   int   // of those, tokens Match found cached
	// compares counts token-slice comparisons made by descents (Match,
	// MatchLen, Insert): the cost of PITFALLS.md, "Three prefix
	// comparisons per descent".
	compares int

	// Eviction bookkeeping (evict.go): the evictable leaves in policy
	// order, the blocks Evict could free, the nodes someone else held when
	// last measured, the nodes Match reached (reused), and the nodes
	// eviction left with one child, which Evict may merge with it (reused).
	leaves    leafHeap
	evictable int
	pinned    []*node
	reached   []*node
	chains    []*node
	// pick, when set (by tests), is shown each leaf Evict takes from.
	pick func(*node)
}

var _ kvcache.PrefixCache = (*Trie)(nil)

// node is one run of tokens and the blocks that hold their KV.
type node struct {
	// tokens is a whole number of blocks (empty only at the root). It is
	// never written after creation: splits and trims only reslice it.
	tokens []int32
	// blocks[i] holds the KV of tokens[i*bs : (i+1)*bs]; the trie holds
	// one allocator reference on each.
	blocks []int32
	// children maps keyOf(child.tokens) to the child. Siblings never
	// share a first block: those would have been one node.
	children map[uint64]*node
	parent   *node  // nil only at a root
	salt     string // the cache salt of a root; empty below the roots
	lastUse  int64  // clock of the last Match or Insert that reached it
	// joins lists, ascending, the indices in blocks where a merged child's
	// blocks begin (see merge). Eviction treats each segment between joins
	// as the node it was: it trims a segment only once those after it are
	// gone, and only if nobody but the trie holds it.
	joins []int
	// refs counts the sequences that have used the node: one for the
	// Insert that created it, one per Match that lent any of its blocks.
	// It is history, not ownership (the allocator's counts are that), and
	// only the Priority policy reads it. Every sequence that reached a
	// node reached its parent too, so a parent's count is never below its
	// child's.
	refs int

	// Eviction bookkeeping, kept by evict.go.
	key      uint64 // keyOf(first block): n's key in parent.children
	end      int    // blocks from the root to n's last block (its Depth)
	tail     int    // trailing blocks, whole segments, only the trie holds
	full     bool   // tail == len(blocks)
	busyKids int    // children whose subtree Evict cannot empty
	counted  int    // what n adds to Trie.evictable
	inBusy   bool   // n is one of parent.busyKids
	pinned   bool   // n is in Trie.pinned
	dead     bool   // n left the trie (evicted or merged away)
	hidx     int    // 1 + n's index in Trie.victims; 0 if absent
}

// New returns an empty trie lending blocks of blockSize tokens from a.
// Eviction follows policy; nil means DeepestFirst.
func New(a *kvcache.Allocator, blockSize int, policy Policy) *Trie {
	if blockSize <= 0 {
		panic(fmt.Sprintf("trie: block size must be positive, have %d", blockSize))
	}
	if policy == nil {
		policy = DeepestFirst
	}
	return &Trie{
		alloc:  a,
		bs:     blockSize,
		policy: policy,
		root:   &node{full: true},
		salted: make(map[string]*node),
		holds:  make([]int32, a.Total()),
		lent:   make(map[int][]int32),
		leaves: leafHeap{policy: policy},
	}
}

// Holds returns the allocator references on b that the trie accounts for:
// one if a node lists b, plus one per live sequence b is lent to.
func (t *Trie) Holds(b int32) int { return int(t.holds[b]) }

// Stats reports the blocks nodes list now and the blocks evicted so far.
func (t *Trie) Stats() kvcache.CacheStats {
	return kvcache.CacheStats{Blocks: t.blocks, Evicted: t.evicted}
}

// HitRate returns the fraction of prompt tokens, over every Match so far,
// whose KV was found cached: a rate in tokens, between 0 and 1.
func (t *Trie) HitRate() float64 {
	if t.queried == 0 {
		return 0
	}
	return float64(t.found) / float64(t.queried)
}

// take adds an allocator reference on each block and accounts for it.
func (t *Trie) take(blocks []int32) {
	for _, b := range blocks {
		t.alloc.Incref(b)
		t.holds[b]++
	}
}

// drop gives back references take added. Dropping one the trie never took
// would free a block someone else reads; the count is asserted, never
// clamped at zero.
func (t *Trie) drop(blocks []int32) {
	for _, b := range blocks {
		if t.holds[b] <= 0 {
			panic(fmt.Sprintf("trie: dropping a reference on block %d that the trie never took", b))
		}
		t.holds[b]--
		t.alloc.Decref(b)
	}
}

// rootOf returns the root of salt's trie; nil if salt has none and create
// is false.
func (t *Trie) rootOf(salt string, create bool) *node {
	if salt == "" {
		return t.root
	}
	r := t.salted[salt]
	if r == nil && create {
		r = &node{salt: salt, full: true}
		t.salted[salt] = r
	}
	return r
}

// roots returns every root: the unsalted one first, then the salted ones.
func (t *Trie) roots() []*node {
	out := make([]*node, 0, 1+len(t.salted))
	out = append(out, t.root)
	for _, r := range t.salted {
		out = append(out, r)
	}
	return out
}

// dropIfEmpty forgets salted root r once nothing hangs under it.
func (t *Trie) dropIfEmpty(r *node) {
	if r != t.root && r.parent == nil && len(r.children) == 0 {
		delete(t.salted, r.salt)
	}
}

// Comparisons returns how many token-slice comparisons the trie's descents
// have made so far: one per node a lookup passes, plus a binary search's
// few in the node where it stops. A lesson's instrument: a descent that
// scanned every sibling would make one per child.
func (t *Trie) Comparisons() int { return t.compares }

// PrefixCache builds a trie that evicts the deepest leaves first (the
// runnable's choice: shared beginnings of prompts stay longest) for an
// engine: it has the type of engine.Config.PrefixCache, as radix.New and
// blockhash.PrefixCache do.
func PrefixCache(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
	return New(a, blockSize, DeepestFirst)
}

// WithPolicy returns a PrefixCache constructor whose tries evict by p.
func WithPolicy(p Policy) func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
	return func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache { return New(a, blockSize, p) }
}

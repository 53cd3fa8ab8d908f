// Package radix is a block-aligned radix tree of cached KV blocks: the
// prefix cache of a serving engine that reuses the KV of a shared prompt
// prefix instead of computing it again.
//
// Every node holds one full KV block, and the edge into it is labelled by
// that block's BlockSize token ids, so the path from the root to a node
// spells the token prefix whose KV the blocks along it hold. Only whole
// blocks are ever cached or matched: a block that is still filling up
// belongs to the one sequence writing it.
//
// Ownership follows the tree-refcount contract: the tree manages a cached
// block's lifetime. It holds exactly one allocator reference per node,
// usually adopted from the sequence that wrote the block, and drops it when
// it evicts the node. A sequence reading a tree block holds no reference on
// it; the node counts its readers instead (users), and a node with users is
// never evicted.
//
// Salted prefixes live in separate trees: the tree has one root per cache
// salt, the unsalted root being the "" salt's. A lookup starts at its
// salt's root and can only reach nodes some sequence with the same salt
// inserted, so no descent, eviction or adoption ever moves a block between
// tenants (see docs/phase08_prefix.md, "Tenants").
//
// The nodes are stored compactly — one slice of nodes linked by index, one
// slice of tokens, one table of edges (node.go, edges.go) — so that the
// garbage collector has no pointers to follow however large the cache
// grows; think of them as the pointer tree the docs draw.
//
// Tree implements kvcache.PrefixCache; the pool is its only caller.
package radix

import (
	"fmt"
	"hash/maphash"

	"kvlab/common/kvcache"
)

// Tree is a prefix cache keyed by block-aligned token prefixes.
type Tree struct {
	alloc     *kvcache.Allocator
	blockSize int

	// nodes[b] is block b's node, for every block of the allocator; after
	// them come ring, root and the salted roots.
	nodes   []node
	tokens  []int32 // block node b's tokens are tokens[b*blockSize:][:blockSize]
	edges   []edge  // the parent-to-child edges nodes do not keep; see edges.go
	mask    uint32  // len(edges)-1
	inTable int     // edges in the table
	seed    maphash.Seed
	// weakHash makes hash collide almost always: tests set it (export_test.go)
	// to prove that findEdge compares keys, which a real 32-bit hash leaves
	// to chance.
	weakHash bool

	root int32 // the unsalted tree's root: no block, no label, depth 0
	// salted holds the root of each salt's tree but the unsalted one, and
	// saltOf the other way round. A root goes when its last child is
	// evicted, so salts no longer used cost nothing; its slot goes to
	// freeRoots for the next salt.
	salted    map[string]int32
	saltOf    map[int32]string
	freeRoots []int32

	// held maps each sequence to the deepest node it uses. A sequence uses
	// the nodes whose blocks it reads as lent pages, which always form a
	// path from the root (the prefix Match found, then the blocks Insert
	// adopted from it), so that one node names them all.
	held     map[int]int32
	cached   int            // block nodes
	detached map[int32]bool // nodes Forget took out of reach while sequences read them (forget.go)

	ring    int32 // sentinel of the ring of nodes without users; see lru.go
	idle    int   // nodes on the lru ring
	evicted int

	blocks []int32 // Match's result, reused
}

// New returns an empty tree over a's blocks. Its signature is the one
// kvcache.Config.NewCache expects.
func New(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
	return NewTree(a, blockSize)
}

// NewTree returns an empty tree over a's blocks.
func NewTree(a *kvcache.Allocator, blockSize int) *Tree {
	if blockSize <= 0 {
		panic(fmt.Sprintf("radix: block size must be positive, have %d", blockSize))
	}
	total := a.Total()
	t := &Tree{
		alloc:     a,
		blockSize: blockSize,
		nodes:     make([]node, total+2),
		tokens:    make([]int32, total*blockSize),
		edges:     newEdges(8),
		seed:      maphash.MakeSeed(),
		ring:      int32(total),
		root:      int32(total + 1),
		salted:    map[string]int32{},
		saltOf:    map[int32]string{},
		held:      map[int]int32{},
	}
	t.mask = uint32(len(t.edges) - 1)
	for i := range t.nodes {
		t.nodes[i] = node{parent: none, first: none, recent: none}
	}
	t.nodes[t.ring].prev, t.nodes[t.ring].next = t.ring, t.ring
	return t
}

// rootOf returns the root of salt's tree, or nil if nothing was ever
// inserted under salt (or all of it was evicted). With create it makes the
// root instead of returning nil.
func (t *Tree) rootOf(salt string, create bool) int32 {
	if salt == "" {
		return t.root
	}
	if r, ok := t.salted[salt]; ok {
		return r
	}
	if !create {
		return none
	}
	var r int32
	if k := len(t.freeRoots); k > 0 {
		r, t.freeRoots = t.freeRoots[k-1], t.freeRoots[:k-1]
	} else {
		r = int32(len(t.nodes))
		t.nodes = append(t.nodes, node{})
	}
	t.nodes[r] = node{parent: none, first: none, recent: none}
	t.salted[salt], t.saltOf[r] = r, salt
	return r
}

// dropRoot forgets salted root r, which has no children left.
func (t *Tree) dropRoot(r int32) {
	delete(t.salted, t.saltOf[r])
	delete(t.saltOf, r)
	t.freeRoots = append(t.freeRoots, r)
}

// find returns the deepest node of salt's tree whose path is a prefix of
// tokens (the root when not even the first block is cached, none when salt
// has no tree). It changes nothing.
//
// It walks down one block at a time, asking each node for the child
// labelled by the next block (child). This is the walk to read; MatchLen
// runs findFast (fastlane.go), the same walk with a fast lane for chains,
// and TestFastLanesAgreeWithTheWalk and FuzzFastLanes check that the two
// find the same node.
func (t *Tree) find(salt string, tokens []int32) int32 {
	n := t.rootOf(salt, false)
	if n == none {
		return none
	}
	bs := t.blockSize
	for len(tokens) >= bs {
		c := t.child(n, tokens[:bs])
		if c == none {
			break
		}
		n, tokens = c, tokens[bs:]
	}
	return n
}

// MatchLen returns how many leading tokens Match would find cached: a
// multiple of the block size. It takes no references and leaves recency
// alone, so admission may ask as often as it likes.
func (t *Tree) MatchLen(salt string, tokens []int32) int {
	n := t.findFast(salt, tokens) // find, with a fast lane (fastlane.go)
	if n == none {
		return 0
	}
	return int(t.nodes[n].depth) * t.blockSize
}

// Match finds the longest block-aligned prefix of tokens cached under salt,
// records seq as a user of every node on it until Release(seq), and returns their
// blocks in position order and the number of tokens they hold. A prompt
// that is all whole blocks may match entirely; the engine then recomputes
// its last token for the logits. The slice is valid until the next Match.
func (t *Tree) Match(seq int, salt string, tokens []int32) (blocks []int32, matched int) {
	if _, ok := t.held[seq]; ok {
		panic(fmt.Sprintf("radix: sequence %d matched again before its release", seq))
	}
	n := t.rootOf(salt, false)
	if n == none {
		return t.blocks[:0], 0
	}
	n, blocks = t.descendFast(n, tokens, t.blocks[:0]) // descend, with a fast lane (fastlane.go)
	if len(blocks) > 0 {
		t.held[seq] = n
	}
	t.blocks = blocks
	return blocks, len(blocks) * t.blockSize
}

// descend is Match's walk: down from n one block at a time, as find goes,
// making the sequence a user of every node it passes and appending the
// node's block to blocks. It returns the last node reached and blocks.
// Each step also makes the child the node's recent one, which lookups try
// first (node.recent). This is the walk to read; Match runs descendFast
// (fastlane.go), which follows recent children without a lookup, and
// TestFastLanesAgreeWithTheWalk and FuzzFastLanes check that the two
// leave the tree the same.
func (t *Tree) descend(n int32, tokens, blocks []int32) (int32, []int32) {
	bs := t.blockSize
	for len(tokens) >= bs {
		c := t.child(n, tokens[:bs])
		if c == none {
			break
		}
		t.nodes[n].recent = c // the child matched last
		t.use(c)
		blocks = append(blocks, c) // node c holds block c
		n, tokens = c, tokens[bs:]
	}
	return n, blocks
}

// Insert caches the whole blocks of tokens that seq wrote, pages being its
// page table, of which the first lent pages came from the tree. It returns
// how many leading pages the tree lends now.
//
// The blocks seq got from Match are skipped, not counted again: seq is
// already one of their users. Each new block after them becomes a node that
// adopts the page, and seq's reference on it: seq now reads it as a lent
// page, and is its user. A block some other sequence cached first is not
// adopted: seq keeps its own copy, and since lent pages must be a prefix of
// the page table, the tree adopts nothing after it. It still caches the
// later blocks, each with an allocator reference of its own; seq does not
// read those nodes, so they have no user and may be evicted while seq runs.
// Everything goes into salt's tree, the one seq matched in.
func (t *Tree) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) (newLent int) {
	n, ok := t.held[seq]
	if !ok {
		n = t.rootOf(salt, true)
	}
	if depth := int(t.nodes[n].depth); depth != lent {
		panic(fmt.Sprintf("radix: sequence %d has %d pages lent, the tree lent it %d", seq, lent, depth))
	}
	bs := t.blockSize
	for i := lent; i < len(pages) && (i+1)*bs <= len(tokens); i++ {
		block := tokens[i*bs : (i+1)*bs]
		if c := t.child(n, block); c != none {
			n = c // cached by another sequence: seq keeps its own copy
			continue
		}
		if lent < i { // adoption stopped at a block seq does not lend
			t.alloc.Incref(pages[i])
			n = t.newNode(n, block, pages[i])
			t.rest(n)
			continue
		}
		n = t.newNode(n, block, pages[i])
		t.nodes[n].users = 1
		t.held[seq] = n
		lent++
	}
	if t.nodes[n].depth == 0 && n != t.root && t.nodes[n].kids == 0 {
		t.dropRoot(n) // nothing to cache: keep no empty tree
	}
	return lent
}

// Release ends seq's use of its nodes. Releasing an unknown sequence is a
// no-op.
func (t *Tree) Release(seq int) {
	n, ok := t.held[seq]
	if !ok {
		return
	}
	delete(t.held, seq)
	nodes := t.nodes
	for ; nodes[n].depth > 0; n = nodes[n].parent { // deepest first; lru.go says why
		nd := &nodes[n]
		nd.users-- // one user of n is gone
		switch {
		case nd.users < 0:
			panic("radix: node released more often than used")
		case nd.users == 0:
			t.rest(n)
		}
	}
}

// Holds returns the allocator references the tree holds on block b: one
// when a node holds it, else none.
func (t *Tree) Holds(b int32) int {
	if t.Contains(b) {
		return 1
	}
	return 0
}

// Contains reports whether a node holds block b.
func (t *Tree) Contains(b int32) bool { return t.nodes[b].parent != none }

// Cached returns the number of blocks the tree holds.
func (t *Tree) Cached() int { return t.cached }

// Stats reports the cached and evicted block counts.
func (t *Tree) Stats() kvcache.CacheStats {
	return kvcache.CacheStats{Blocks: t.cached, Evicted: t.evicted}
}

// PrefixCache is New under the name the other designs use
// (blockhash.PrefixCache, trie.PrefixCache), so the three plug into
// engine.Config.PrefixCache the same way.
func PrefixCache(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache { return New(a, blockSize) }

package trie

import (
	"slices"

	"kvlab/common/kvcache"
)

// tutorialTree is a small Go port of the radix tree in a published mini-vLLM
// tutorial (a C++ header and a Python twin), kept with its mistakes so
// that the pitfall tests can show them. Nodes hold edges of any length,
// children are keyed by first token, and a node's ref counts the
// sequences that end at it. Lines marked MISTAKE are the tutorial's.
type tutorialTree struct {
	root  *tutorialNode
	clock int64
	// hardCoded16 splits as the C++ version does, assuming 16 tokens per
	// block whatever the block size; the Python version rounds up instead.
	hardCoded16 bool
	// merge makes remove merge a node left with one child into it, as the
	// C++ version does.
	merge bool
	// assertRefs panics on a reference count going below zero instead of
	// clamping it: the fix, to show what the clamp hides.
	assertRefs bool

	matchedTokens, queries int
}

type tutorialNode struct {
	tokens   []int32
	blocks   []int32
	children map[int32]*tutorialNode
	parent   *tutorialNode
	ref      int
	lastUse  int64
}

func newTutorialTree() *tutorialTree {
	return &tutorialTree{root: &tutorialNode{children: map[int32]*tutorialNode{}}}
}

func (t *tutorialTree) addChild(parent, child *tutorialNode) {
	parent.children[child.tokens[0]] = child
	child.parent = parent
}

func (t *tutorialTree) removeRef(n *tutorialNode) {
	n.ref--
	if n.ref < 0 {
		if t.assertRefs {
			panic("tutorial tree: reference count below zero")
		}
		n.ref = 0 // MISTAKE: the underflow is hidden
	}
}

// match follows whole edges only and returns every block of every edge it
// followed.
func (t *tutorialTree) match(tokens []int32) (last *tutorialNode, matched int, blocks []int32) {
	t.queries++
	last, cur := t.root, t.root
	for matched < len(tokens) {
		child := cur.children[tokens[matched]]
		if child == nil || commonPrefix(child.tokens, tokens[matched:]) < len(child.tokens) {
			break
		}
		matched += len(child.tokens) // MISTAKE: an edge need not be whole blocks
		blocks = append(blocks, child.blocks...)
		t.clock++
		child.lastUse = t.clock
		last, cur = child, child
	}
	t.matchedTokens += matched
	return last, matched, blocks
}

// insert adds tokens (with the blocks holding their KV) and returns the
// node the sequence ends at; the tree counts one more user there.
func (t *tutorialTree) insert(tokens, blocks []int32, bs int) *tutorialNode {
	cur, pos, blockIdx := t.root, 0, 0
	for pos < len(tokens) {
		child := cur.children[tokens[pos]]
		if child == nil {
			break
		}
		m := commonPrefix(child.tokens, tokens[pos:])
		if m == len(child.tokens) {
			cur, pos, blockIdx = child, pos+m, blockIdx+len(child.blocks)
			t.clock++
			child.lastUse = t.clock
			continue
		}
		if m > 0 {
			// MISTAKE: blockIdx is not advanced past the head's blocks, so
			// the new leaf below also lists them.
			cur, pos = t.split(cur, child, m, bs), pos+m
		}
		break
	}
	if pos == len(tokens) {
		cur.ref++
		return cur
	}
	t.clock++
	leaf := &tutorialNode{tokens: slices.Clone(tokens[pos:]), blocks: slices.Clone(blocks[blockIdx:]), ref: 1, lastUse: t.clock, children: map[int32]*tutorialNode{}}
	t.addChild(cur, leaf)
	return leaf
}

// split cuts child after pos tokens: a new head node takes the first pos
// tokens and some blocks, child keeps the rest below it.
func (t *tutorialTree) split(parent, child *tutorialNode, pos, bs int) *tutorialNode {
	head := (pos + bs - 1) / bs // MISTAKE: rounds up, so the head takes a block the tail's tokens are in
	if t.hardCoded16 {
		head = (pos + 15) / 16 // MISTAKE: 16 tokens per block, whatever bs is
	}
	head = min(head, len(child.blocks))
	h := &tutorialNode{tokens: slices.Clone(child.tokens[:pos]), blocks: slices.Clone(child.blocks[:head]), children: map[int32]*tutorialNode{}}
	child.tokens, child.blocks = child.tokens[pos:], child.blocks[head:]
	delete(parent.children, h.tokens[0])
	t.addChild(parent, h)
	t.addChild(h, child)
	h.ref = child.ref // MISTAKE: the head takes the child's count
	t.clock++
	h.lastUse = t.clock
	return h
}

// remove drops a sequence ending at leaf: it decrements every node up to
// the root and frees each one left unused without children.
func (t *tutorialTree) remove(leaf *tutorialNode) (freed []int32) {
	for cur := leaf; cur != nil && cur != t.root; cur = cur.parent {
		t.removeRef(cur) // MISTAKE: only the leaf was ever incremented
		if cur.ref != 0 || len(cur.children) > 0 {
			continue
		}
		freed = append(freed, cur.blocks...)
		p := cur.parent
		delete(p.children, cur.tokens[0])
		if t.merge && p != t.root && len(p.children) == 1 && p.ref == 0 {
			t.mergeWithChild(p)
		}
	}
	return freed
}

// mergeWithChild folds n's only child into n.
func (t *tutorialTree) mergeWithChild(n *tutorialNode) {
	var child *tutorialNode
	for _, c := range n.children {
		child = c
	}
	n.tokens = append(n.tokens, child.tokens...)
	n.blocks = append(n.blocks, child.blocks...)
	n.children = child.children
	for _, g := range n.children {
		g.parent = n
	}
	n.ref = child.ref // MISTAKE: the child's users now count for both nodes' blocks
}

// evictLRU frees unused leaves, least recently used first, until it has
// freed at least n blocks or run out of the leaves it collected.
func (t *tutorialTree) evictLRU(n int) (freed []int32) {
	var leaves []*tutorialNode
	var collect func(*tutorialNode)
	collect = func(x *tutorialNode) {
		if x != t.root && len(x.children) == 0 && x.ref == 0 {
			leaves = append(leaves, x)
		}
		for _, c := range x.children {
			collect(c)
		}
	}
	collect(t.root)
	slices.SortFunc(leaves, func(a, b *tutorialNode) int { return int(a.lastUse - b.lastUse) })
	for _, x := range leaves {
		if len(freed) >= n {
			break
		}
		freed = append(freed, x.blocks...)
		delete(x.parent.children, x.tokens[0])
		// MISTAKE: a parent left without children is not a candidate
		// until the next call.
	}
	return freed
}

// hitRate is the tutorial's "rough estimate".
func (t *tutorialTree) hitRate() float64 {
	if t.queries == 0 {
		return 0
	}
	return float64(t.matchedTokens) / float64(t.queries*100) // MISTAKE: not a rate
}

// tutorialExtend ports the tutorial's growth of a sequence by need blocks:
// evict until they fit. The original loops forever when nothing can be
// evicted; the port gives up after limit rounds and reports how many it
// made.
func tutorialExtend(a *kvcache.Allocator, t *tutorialTree, need, limit int) (rounds int, ok bool) {
	for !a.CanAllocate(need) {
		for _, b := range t.evictLRU(need - a.NumFree()) {
			a.Decref(b)
		}
		rounds++
		if rounds == limit {
			return rounds, false // MISTAKE in the original: no way out of the loop
		}
	}
	return rounds, true
}

// tutorialCache plugs tutorialTree into the pool's seam with the trie's
// reference contract (one allocator reference per lent block and per node
// block), so that only the tree's own logic differs from the library's.
type tutorialCache struct {
	t     *tutorialTree
	a     *kvcache.Allocator
	bs    int
	lent  map[int][]int32
	holds map[int32]int
}

func newTutorialCache(a *kvcache.Allocator, bs int) *tutorialCache {
	return &tutorialCache{t: newTutorialTree(), a: a, bs: bs, lent: map[int][]int32{}, holds: map[int32]int{}}
}

func (c *tutorialCache) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	_, matched, blocks := c.t.match(tokens)
	for _, b := range blocks {
		c.a.Incref(b)
		c.holds[b]++
	}
	c.lent[seq] = blocks
	return blocks, matched
}

func (c *tutorialCache) MatchLen(salt string, tokens []int32) int {
	_, m, _ := c.t.match(tokens)
	return m
}

func (c *tutorialCache) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	before := c.t.root.count()
	leaf := c.t.insert(tokens, pages[:(len(tokens)+c.bs-1)/c.bs], c.bs)
	if c.t.root.count() > before { // a new leaf: the tree takes its blocks
		for _, b := range leaf.blocks {
			c.a.Incref(b)
			c.holds[b]++
		}
	}
	return lent
}

// count returns the number of nodes in n's subtree.
func (n *tutorialNode) count() int {
	total := 1
	for _, c := range n.children {
		total += c.count()
	}
	return total
}

func (c *tutorialCache) Release(seq int) {
	for _, b := range c.lent[seq] {
		c.a.Decref(b)
		c.holds[b]--
	}
	delete(c.lent, seq)
}

func (c *tutorialCache) Evict(int) int             { return 0 }
func (c *tutorialCache) Evictable() int            { return 0 }
func (c *tutorialCache) Holds(b int32) int         { return c.holds[b] }
func (c *tutorialCache) Stats() kvcache.CacheStats { return kvcache.CacheStats{} }

var _ kvcache.PrefixCache = (*tutorialCache)(nil)

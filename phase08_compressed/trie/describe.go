package trie

import (
	"fmt"
	"maps"
	"slices"

	"kvlab/common/kvcache"
)

// Describe returns the trie as data (kvcache.Describer): one node per trie
// node, a run of blocks, its ID the node's first block (which a node keeps
// while it lives: trims take blocks from the end, and a merge keeps the
// parent's). Nodes come depth first, the unsalted trie, then each salt's
// in salt order, siblings by tokens; a truncated view (max > 0) drops
// whole subtrees from the end. Policy names the configured eviction
// policy.
//
// Users counts the live sequences the trie lent the node's first block to
// (Match lends a prefix of a node, so no block of it has more); each holds
// an allocator reference, as does the node. EvictRank orders the nodes by
// the first of their blocks that Evict(1), called again and again, would
// free: the policy picks a leaf and trims it from the end, so the blocks
// of leaves of a deep DeepestFirst tree interleave, and a node's rank says
// when it starts to go. A merged node may lose its idle trailing segments
// while its head is lent. -1: Evict frees none of its blocks now.
//
// The order is not worked out again by hand: Describe runs Evict(1) on a
// copy of the trie over a copy of the allocator's counts, so it is the
// order of Evict's own code, merges between the calls included. That costs
// a copy of the trie and O(log n) per block; the trie itself is only read:
// no clock, heap, count or pinned list changes.
func (t *Trie) Describe(max int) kvcache.View {
	v := kvcache.View{Design: "trie", BlockSize: t.bs, Policy: PolicyName(t.policy)}
	step := t.evictSteps()
	type ranked struct {
		i, first int
	}
	var order []ranked
	var walk func(n *node, parent int, salt string)
	walk = func(n *node, parent int, salt string) {
		kids := slices.SortedFunc(maps.Values(n.children), func(a, b *node) int { return slices.Compare(a.tokens, b.tokens) })
		for _, c := range kids {
			refs := make([]int, len(c.blocks))
			first := -1
			for j, b := range c.blocks {
				refs[j] = t.alloc.Refs(b)
				if s, ok := step[b]; ok && (first < 0 || s < first) {
					first = s
				}
			}
			if first >= 0 {
				order = append(order, ranked{len(v.Nodes), first})
			}
			v.Nodes = append(v.Nodes, kvcache.ViewNode{
				ID: int(c.blocks[0]), Parent: parent, Salt: salt,
				Tokens: slices.Clone(c.tokens), Blocks: slices.Clone(c.blocks), Refs: refs,
				Users: int(t.holds[c.blocks[0]]) - 1, EvictRank: -1,
			})
			walk(c, int(c.blocks[0]), salt)
		}
	}
	walk(t.root, -1, "")
	for _, s := range slices.Sorted(maps.Keys(t.salted)) {
		walk(t.salted[s], -1, s)
	}
	slices.SortFunc(order, func(a, b ranked) int { return a.first - b.first })
	for r, o := range order {
		v.Nodes[o.i].EvictRank = r
	}
	return v.Truncate(max)
}

// evictSteps returns, for every block Evict could free now, the call of
// Evict(1), counting from 0, that frees it, found by running those calls
// on a copy of the trie (clone) until one frees nothing.
func (t *Trie) evictSteps() map[int32]int {
	c := t.clone()
	step := map[int32]int{}
	var picked [][]int32
	c.pick = func(n *node) { picked = append(picked, slices.Clone(n.blocks)) }
	for s := 0; ; s++ {
		picked = picked[:0]
		if c.Evict(1) == 0 {
			return step
		}
		for _, blocks := range picked {
			for _, b := range blocks {
				if _, ok := step[b]; !ok && c.holds[b] == 0 {
					step[b] = s
				}
			}
		}
	}
}

// clone returns a copy of t that shares nothing t changes, over a new
// allocator with the same counts, for evictSteps to evict from.
func (t *Trie) clone() *Trie {
	total := t.alloc.Total()
	a := kvcache.NewAllocator(total)
	all, _ := a.Allocate(nil, total)
	for _, b := range all {
		switch r := t.alloc.Refs(b); r {
		case 0:
			a.Decref(b)
		default:
			for range r - 1 {
				a.Incref(b)
			}
		}
	}
	c := &Trie{
		alloc: a, bs: t.bs, policy: t.policy, salted: map[string]*node{},
		holds: slices.Clone(t.holds), lent: map[int][]int32{},
		blocks: t.blocks, evicted: t.evicted, evictable: t.evictable,
		leaves: leafHeap{policy: t.policy},
	}
	copies := map[*node]*node{}
	var copyNode func(n, parent *node) *node
	copyNode = func(n, parent *node) *node {
		m := *n
		m.parent = parent
		m.blocks, m.joins = slices.Clone(n.blocks), slices.Clone(n.joins)
		m.children = make(map[uint64]*node, len(n.children))
		copies[n] = &m
		for k, ch := range n.children {
			m.children[k] = copyNode(ch, &m)
		}
		return &m
	}
	c.root = copyNode(t.root, nil)
	for s, r := range t.salted {
		c.salted[s] = copyNode(r, nil)
	}
	mapped := func(ns []*node) []*node {
		out := make([]*node, 0, len(ns))
		for _, n := range ns {
			if m, ok := copies[n]; ok {
				out = append(out, m)
			} else { // a node no longer in the trie, as t keeps it
				m := *n
				out = append(out, &m)
			}
		}
		return out
	}
	c.leaves.items, c.pinned, c.chains = mapped(t.leaves.items), mapped(t.pinned), mapped(t.chains)
	return c
}

// PolicyName returns the name of one of the package's policies
// ("deepest-first", "lru", "priority", "size-aware"), or the Go type of
// another.
func PolicyName(p Policy) string {
	switch p {
	case DeepestFirst:
		return "deepest-first"
	case LRU:
		return "lru"
	case Priority:
		return "priority"
	case SizeAware:
		return "size-aware"
	}
	return fmt.Sprintf("%T", p)
}

var _ kvcache.Describer = (*Trie)(nil)

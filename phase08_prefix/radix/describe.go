package radix

import (
	"maps"
	"slices"

	"kvlab/common/kvcache"
)

// Describe returns the tree as data (kvcache.Describer): one node per tree
// node, each holding one block, with the block's id as the node's ID (a
// node holds its block for as long as it lives). Nodes come depth first,
// the unsalted tree, then each salt's in salt order, siblings by tokens,
// so a truncated view (max > 0) drops whole subtrees from the end.
//
// Users is the node's count of live sequences reading its block as a lent
// page; they hold no allocator reference, so Refs is the tree's one plus
// one per sequence that owns the block (the writer of a block the tree
// cached without adopting it, or a fork of a user). EvictRank is the
// node's place on the lru ring, the order Evict takes nodes in: every
// node without users, leaves before the parents that wait for them; -1
// for the nodes in use.
//
// Describe reads the tree and changes nothing: no lru move, no count.
func (t *Tree) Describe(max int) kvcache.View {
	v := kvcache.View{Design: "radix", BlockSize: t.blockSize, Policy: "lru"}
	rank := map[int32]int{}
	for n := t.nodes[t.ring].next; n != t.ring; n = t.nodes[n].next {
		rank[n] = len(rank)
	}
	kids := map[int32][]int32{}
	for b := range int32(t.alloc.Total()) {
		if p := t.nodes[b].parent; p != none {
			kids[p] = append(kids[p], b)
		}
	}
	var walk func(n, parent int32, salt string)
	walk = func(n, parent int32, salt string) {
		ks := kids[n]
		slices.SortFunc(ks, func(a, b int32) int { return slices.Compare(t.tokensOf(a), t.tokensOf(b)) })
		for _, c := range ks {
			r, ok := rank[c]
			if !ok {
				r = -1
			}
			v.Nodes = append(v.Nodes, kvcache.ViewNode{
				ID: int(c), Parent: int(parent), Salt: salt,
				Tokens: slices.Clone(t.tokensOf(c)), Blocks: []int32{c}, Refs: []int{t.alloc.Refs(c)},
				Users: int(t.nodes[c].users), EvictRank: r,
			})
			walk(c, c, salt)
		}
	}
	walk(t.root, none, "")
	for _, s := range slices.Sorted(maps.Keys(t.salted)) {
		walk(t.salted[s], none, s)
	}
	return v.Truncate(max)
}

var _ kvcache.Describer = (*Tree)(nil)

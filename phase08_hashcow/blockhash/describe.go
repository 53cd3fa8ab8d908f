package blockhash

import (
	"cmp"
	"slices"

	"kvlab/common/kvcache"
)

// Describe returns the index as data (kvcache.Describer): one node per
// cached block, its ID the block's id, under the block before it in its
// prompt as Dump finds it (by serial). A block whose parent was evicted
// first is a root: no walk reaches it, and the salt of its prompt, which
// only a first block records, is lost with the parent, so it shows "".
// Nodes come depth first, roots by salt, then tokens; siblings by tokens;
// a truncated view (max > 0) drops whole subtrees from the end.
//
// Users counts the sequences holding the block through Match, each with
// an allocator reference of its own; Refs is the index's one, theirs, and
// those of sequences that own the block. EvictRank is the block's place
// in the queue as Evict will find it: Evict first settles, queuing the
// blocks only the index holds now (unreachable ones at the front, the
// rest at the back in the order of their last use, deepest first), and
// Describe works that order out on a copy of the queue, so the blocks
// Evict(1) takes, one call after another, come in rank order. Blocks with
// another holder have -1.
//
// Describe reads the index and changes nothing: it does not settle, and
// no clock, queue or count moves.
func (c *Cache) Describe(max int) kvcache.View {
	v := kvcache.View{Design: "blockhash", BlockSize: c.bs, Policy: "lru"}
	rank := map[int32]int{}
	for i, b := range c.evictOrder() {
		rank[b] = i
	}
	kids := c.children() // -1: roots
	byTokens := func(x, y int32) int {
		return cmp.Or(slices.Compare(c.tokensOf(x), c.tokensOf(y)), cmp.Compare(x, y))
	}
	roots := kids[-1]
	slices.SortFunc(roots, func(x, y int32) int { return cmp.Or(cmp.Compare(c.saltOf(x), c.saltOf(y)), byTokens(x, y)) })
	seen := map[int32]bool{}
	var walk func(b int32, parent int, salt string)
	walk = func(b int32, parent int, salt string) {
		seen[b] = true
		r, ok := rank[b]
		if !ok {
			r = -1
		}
		v.Nodes = append(v.Nodes, kvcache.ViewNode{
			ID: int(b), Parent: parent, Salt: salt,
			Tokens: slices.Clone(c.tokensOf(b)), Blocks: []int32{b}, Refs: []int{c.alloc.Refs(b)},
			Users: c.usersOf(b), EvictRank: r,
		})
		ks := kids[b]
		slices.SortFunc(ks, byTokens)
		for _, k := range ks {
			walk(k, int(b), salt)
		}
	}
	for _, b := range roots {
		walk(b, -1, c.saltOf(b))
	}
	// A parent re-hung under its own descendant would make a cycle no root
	// leads to; show such blocks as roots rather than leave them out.
	for b := range c.blocks {
		if c.blocks[b].serial != 0 && !seen[int32(b)] {
			walk(int32(b), -1, c.saltOf(int32(b)))
		}
	}
	return v.Truncate(max)
}

// evictOrder returns the blocks Evict would free, in order, as settle
// would queue them, without settling: the queue as it is, the pinned
// blocks only the index holds now put where settle puts them.
func (c *Cache) evictOrder() []int32 {
	var order []int32
	for b := c.lru.head; b >= 0; b = c.blocks[b].next() {
		order = append(order, b)
	}
	var joining []joiner
	for _, b := range c.pinned {
		if c.alloc.Refs(b) > 1 {
			continue
		}
		ord := c.blocks[b].ord
		if ord>>depthBits == 0 { // unreachable: to the front, as pushFront
			i := 0
			for i < len(order) && c.blocks[order[i]].ord <= ord {
				i++
			}
			order = slices.Insert(order, i, b)
			continue
		}
		joining = append(joining, joiner{ord, b})
	}
	sortJoining(joining)
	for _, j := range joining {
		order = append(order, j.b)
	}
	return order
}

var _ kvcache.Describer = (*Cache)(nil)

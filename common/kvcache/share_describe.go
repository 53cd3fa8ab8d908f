package kvcache

import (
	"maps"
	"slices"
)

// TryDescribe describes every salt's share (DescribeForwarder) as one
// View: the parts in salt order, each part's roots roots of the whole,
// every node carrying its part's salt. Node IDs are the parts' own when
// no two parts use the same one (the designs use block ids, which parts
// over one allocator never share), else positions in the view. A max > 0
// truncates the whole, after the merge.
//
// EvictRank is the order Evict(1), called again and again, would take the
// nodes in: Evict picks a salt (the one furthest over its share, else the
// largest) and frees that part's next block, so the parts' own orders are
// merged by replaying that pick, the part's block count going down by a
// node's blocks as it is taken. That is exact for designs of one block per
// node; a trie node of several blocks is counted as leaving when it starts
// to, so where parts are near a tie, their trie nodes may interleave in
// another order than Evict's.
//
// ok is false when the design is no Describer; a share with no part yet
// asks an empty instance of the design for its name.
func (c *shareCache) TryDescribe(max int) (View, bool) {
	v, ok := DescribeCache(c.newCache(NewAllocator(0), c.blockSize), 0)
	if !ok {
		return View{}, false
	}
	v.Nodes = nil
	salts := slices.Sorted(maps.Keys(c.parts))
	queues := map[string][]int{} // salt → its nodes' places in v.Nodes, by their part's rank
	left := map[string]int{}     // salt → blocks its part holds, as the replay goes
	ids := map[int]bool{}
	unique := true
	for _, s := range salts {
		pv, ok := DescribeCache(c.parts[s].cache, 0)
		if !ok {
			return View{}, false
		}
		v.Design, v.Policy = pv.Design, pv.Policy
		var ranked []int
		for _, n := range pv.Nodes {
			if ids[n.ID] {
				unique = false
			}
			ids[n.ID] = true
			n.Salt = s
			if n.EvictRank >= 0 {
				ranked = append(ranked, len(v.Nodes))
			}
			v.Nodes = append(v.Nodes, n)
		}
		slices.SortFunc(ranked, func(a, b int) int { return v.Nodes[a].EvictRank - v.Nodes[b].EvictRank })
		queues[s] = ranked
		left[s] = c.parts[s].cache.Stats().Blocks
	}
	for i := range v.Nodes {
		v.Nodes[i].EvictRank = -1
	}
	for r := 0; ; r++ {
		total, most, salt := 0, -1, ""
		for _, s := range salts {
			total += left[s]
		}
		for _, s := range salts {
			if n := left[s]; len(queues[s]) > 0 && (n > most || n == most && s < salt) {
				salt, most = s, n
			}
		}
		if most < 0 {
			break
		}
		i := queues[salt][0]
		queues[salt] = queues[salt][1:]
		v.Nodes[i].EvictRank = r
		left[salt] -= len(v.Nodes[i].Blocks)
	}
	if !unique {
		renumber(v.Nodes)
	}
	return v.Truncate(max), true
}

// renumber gives nodes their positions as IDs, their parents' included.
func renumber(nodes []ViewNode) {
	// A node's parent is the nearest node before it in its part with the
	// parent's old ID: IDs are unique within a part, and a part's nodes
	// are contiguous, parents first.
	at := map[int]int{}
	for i := range nodes {
		if i > 0 && nodes[i].Salt != nodes[i-1].Salt {
			clear(at)
		}
		old := nodes[i].ID
		if p := nodes[i].Parent; p != -1 {
			nodes[i].Parent = at[p]
		}
		nodes[i].ID = i
		at[old] = i
	}
}

var _ DescribeForwarder = (*shareCache)(nil)

package radix

import (
	"fmt"
	"io"
	"kvlab/common/kvcache"
	"maps"
	"slices"
)

// Dump draws the tree for a trace (kvcache.Dumper): each node's block
// label, its block, the allocator's count on the block (refs: the node's
// one reference, plus one per sequence that owns the block, such as a fork
// of one of its users) and the node's users, the live sequences it lends
// its block to. Salted roots follow the unsalted one.
func (t *Tree) Dump(w io.Writer) {
	fmt.Fprintf(w, "radix tree: %d nodes, %d without users\n", t.cached, t.idle)
	kids := map[int32][]int32{}
	for b := range int32(t.alloc.Total()) {
		if p := t.nodes[b].parent; p != none {
			kids[p] = append(kids[p], b)
		}
	}
	t.dumpNode(w, kids, t.root, "")
	for _, s := range slices.Sorted(maps.Keys(t.salted)) {
		fmt.Fprintf(w, "salt %q:\n", s)
		t.dumpNode(w, kids, t.salted[s], "")
	}
}

func (t *Tree) dumpNode(w io.Writer, kids map[int32][]int32, n int32, indent string) {
	ks := kids[n]
	slices.SortFunc(ks, func(a, b int32) int { return slices.Compare(t.tokensOf(a), t.tokensOf(b)) })
	for i, c := range ks {
		branch, next := kvcache.DumpBranch(i == len(ks)-1)
		fmt.Fprintf(w, "%s%s%v block %d: refs %d, users %d\n", indent, branch, t.tokensOf(c), c, t.alloc.Refs(c), t.nodes[c].users)
		t.dumpNode(w, kids, c, indent+next)
	}
}

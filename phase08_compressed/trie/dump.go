package trie

import (
	"fmt"
	"io"
	"kvlab/common/kvcache"
	"maps"
	"slices"
)

// Dump draws the trie for a trace (kvcache.Dumper): each node's run of
// tokens, one bracket per block, its blocks, and for each block the
// allocator's count (refs) and how many live sequences the trie lent it to
// (lent). The trie's own reference is the one for the node listing the
// block; refs − 1 − lent are sequences that own the block (the one that
// wrote it, or a fork). Salted roots follow the unsalted one.
func (t *Trie) Dump(w io.Writer) {
	fmt.Fprintf(w, "trie: %d blocks in nodes\n", t.blocks)
	t.dumpNode(w, t.root, "")
	for _, s := range slices.Sorted(maps.Keys(t.salted)) {
		fmt.Fprintf(w, "salt %q:\n", s)
		t.dumpNode(w, t.salted[s], "")
	}
}

func (t *Trie) dumpNode(w io.Writer, n *node, indent string) {
	kids := make([]*node, 0, len(n.children))
	for _, c := range n.children {
		kids = append(kids, c)
	}
	slices.SortFunc(kids, func(a, b *node) int { return slices.Compare(a.tokens, b.tokens) })
	for i, c := range kids {
		branch, next := kvcache.DumpBranch(i == len(kids)-1)
		fmt.Fprint(w, indent+branch)
		for j := range c.blocks {
			fmt.Fprint(w, c.tokens[j*t.bs:(j+1)*t.bs])
		}
		refs := make([]int, len(c.blocks))
		lent := make([]int, len(c.blocks))
		for j, b := range c.blocks {
			refs[j], lent[j] = t.alloc.Refs(b), int(t.holds[b])-1
		}
		fmt.Fprintf(w, " blocks %v refs %v lent %v\n", c.blocks, refs, lent)
		t.dumpNode(w, c, indent+next)
	}
}

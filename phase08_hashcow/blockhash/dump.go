package blockhash

import (
	"fmt"
	"io"
	"kvlab/common/kvcache"
	"slices"
)

// Dump draws the index for a trace (kvcache.Dumper): every cached block
// under the block before it in its prompt, with its tokens and the holders
// of its allocator count — the index's one reference, one per sequence
// that matched it, and the rest, sequences that own it (the one that
// wrote it, or a fork). A block whose parent was evicted first is drawn
// at the top, marked.
func (c *Cache) Dump(w io.Writer) {
	fmt.Fprintf(w, "hash index: %d cached blocks\n", c.cached)
	kids := c.children()
	var walk func(p int32, indent string)
	walk = func(p int32, indent string) {
		ks := kids[p]
		slices.SortFunc(ks, func(x, y int32) int { return slices.Compare(c.tokensOf(x), c.tokensOf(y)) })
		for i, b := range ks {
			branch, next := kvcache.DumpBranch(i == len(ks)-1)
			info := c.blocks[b]
			refs := c.alloc.Refs(b)
			fmt.Fprintf(w, "%s%s%v block %d: refs %d = index 1 + matched %d + owners %d", indent, branch, c.tokensOf(b), b, refs, c.usersOf(b), refs-1-c.usersOf(b))
			if p == -1 && info.parent != 0 {
				fmt.Fprint(w, " (parent evicted)")
			}
			if salt := c.saltOf(b); salt != "" {
				fmt.Fprintf(w, " salt %q", salt)
			}
			if refs == 1 {
				fmt.Fprint(w, " evictable")
			}
			fmt.Fprintln(w)
			walk(b, indent+next)
		}
	}
	walk(-1, "")
}

// children maps each cached block to the cached blocks that follow it in
// their prompts (key -1: the blocks with no cached parent, first blocks
// and those whose parent was evicted first), found by serial, for Dump and
// Describe.
func (c *Cache) children() map[int32][]int32 {
	bySerial := map[uint64]int32{}
	for b := range c.blocks {
		if c.blocks[b].serial != 0 {
			bySerial[c.blocks[b].serial] = int32(b)
		}
	}
	kids := map[int32][]int32{}
	for _, b := range bySerial {
		p, ok := bySerial[c.blocks[b].parent]
		if !ok {
			p = -1
		}
		kids[p] = append(kids[p], b)
	}
	return kids
}

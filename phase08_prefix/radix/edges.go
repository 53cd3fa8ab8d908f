package radix

import "hash/maphash"

// The edge table holds the edges of the tree that its nodes do not keep
// themselves (node.first), keyed by the parent's index and the child's
// tokens. It takes the place of a children map in every node: one slice of
// plain integers for the whole tree, which the garbage collector never
// scans, instead of a million small maps it must.
//
// It is open addressing with linear probing: an edge lives in the first
// free slot at or after its home slot, the hash's low bits. The table
// doubles before it is more than half full, so probes stay short, and it
// grows with the edges it holds, not with the blocks: a tree of prompts is
// mostly chains of first children, which need no slot. A removal shifts
// the slots after it back instead of leaving a tombstone (removeEdge).

// edge is one slot of the table.
type edge struct {
	hash uint32 // the key's hash; its home slot is hash & Tree.mask
	node int32  // the child; none: the slot is empty
}

// newEdges returns an empty table of size slots, a power of two.
func newEdges(size int) []edge {
	e := make([]edge, size)
	for i := range e {
		e[i].node = none
	}
	return e
}

// growEdges doubles the table and enters every edge again at its home
// slot under the new mask: the stored hashes make that a copy, no token is
// read.
func (t *Tree) growEdges() {
	old := t.edges
	t.edges = newEdges(2 * len(old))
	t.mask = uint32(len(t.edges) - 1)
	for _, e := range old {
		if e.node == none {
			continue
		}
		i := e.hash & t.mask
		for t.edges[i].node != none {
			i = (i + 1) & t.mask
		}
		t.edges[i] = e
	}
}

// hash hashes the key of the edge from parent labelled by block. Equal keys
// hash alike; the table compares the key itself before it trusts a match.
func (t *Tree) hash(parent int32, block []int32) uint32 {
	if t.weakHash {
		return uint32(parent) & 1 // tests: nearly every key collides
	}
	h := maphash.String(t.seed, label(block))
	return uint32(h ^ uint64(parent)*0x9e3779b97f4a7c15)
}

// findEdge returns parent's child labelled by block, or none.
func (t *Tree) findEdge(parent int32, block []int32) int32 {
	h := t.hash(parent, block)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		e := t.edges[i]
		if e.node == none {
			return none
		}
		if e.hash == h && t.nodes[e.node].parent == parent && t.labelsFast(e.node, block) {
			return e.node
		}
	}
}

// addEdge enters node n, whose parent and tokens are set, into the table.
func (t *Tree) addEdge(n int32) {
	if 2*(t.inTable+1) > len(t.edges) {
		t.growEdges()
	}
	t.inTable++
	h := t.hash(t.nodes[n].parent, t.tokensOf(n))
	i := h & t.mask
	for t.edges[i].node != none {
		i = (i + 1) & t.mask
	}
	t.edges[i] = edge{hash: h, node: n}
}

// removeEdge takes node n out of the table. Emptying its slot alone would
// cut the probe sequence of any edge stored after it, so each later edge
// up to the next empty slot moves back into the hole when its home slot
// allows, and the hole moves on to where it was.
func (t *Tree) removeEdge(n int32) {
	i := t.hash(t.nodes[n].parent, t.tokensOf(n)) & t.mask
	for t.edges[i].node != n {
		i = (i + 1) & t.mask
	}
	for j := (i + 1) & t.mask; t.edges[j].node != none; j = (j + 1) & t.mask {
		// The edge at j may fill the hole at i if its home slot is not
		// after i: it is at least as far from j as i is.
		if home := t.edges[j].hash & t.mask; (j-home)&t.mask >= (j-i)&t.mask {
			t.edges[i] = t.edges[j]
			i = j
		}
	}
	t.edges[i] = edge{node: none}
	t.inTable--
}

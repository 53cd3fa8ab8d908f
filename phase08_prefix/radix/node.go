package radix

import (
	"fmt"
	"slices"
	"unsafe"
)

// none is the index of no node: the parent of a slot that caches nothing,
// the parent of a root, a node without a recent child, an empty edge slot.
const none int32 = -1

// node is one cached block and the edge into it.
//
// Nodes live in one slice, Tree.nodes, and name each other by index, never
// by pointer: the garbage collector has nothing to follow in them, however
// many there are (docs/phase08_prefix.md, "The compact form"). Node b holds
// block b, so a block's node needs no lookup, and its tokens, the label of
// the edge from its parent, are Tree.tokens[b*bs:(b+1)*bs]: the tree's own
// copy, written once when the node is made. Past the allocator's blocks
// come the lru ring's sentinel and the roots, which hold no block.
//
// A node keeps one child in itself (first); the others are in the tree's
// one table of edges, keyed by parent and tokens (edges.go). Most nodes of
// a prompt tree have one child, so most lookups and changes never touch
// the table, and it stays small.
type node struct {
	parent int32 // none: the slot caches nothing (or it is a root)
	depth  int32 // blocks from the root: this node's block is page depth-1
	// users counts the live sequences this node lends its block to. A user
	// of a node uses all of its ancestors too. users > 0 pins the node.
	users int32
	kids  int32 // children, first included
	// first is the child that is not in the edge table: the first one
	// added while the place was free. It is none after that child goes,
	// until a new child takes the place.
	first int32
	// recent is the child added or matched last, tried first: it saves a
	// table lookup where a node has many children, as where a shared
	// system prompt ends.
	recent int32
	// prev and next link the node into the tree's lru ring while users == 0,
	// and mean nothing otherwise.
	prev, next int32
}

// label returns a string that shares block's memory, so that hashing a
// block allocates nothing. It is never stored: the edge table keeps node
// indices, and compares against the tree's own copy of the tokens.
func label(block []int32) string {
	return unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(block))), 4*len(block))
}

// labels reports whether the first blockSize tokens of block are block
// node n's label: the same tokens as the tree's copy. Lookups run
// labelsFast (fastlane.go), the same compare eight bytes at a time;
// TestLabelsFastAgreesWithLabels checks the two.
func (t *Tree) labels(n int32, block []int32) bool {
	return slices.Equal(t.tokensOf(n), block[:t.blockSize])
}

// tokensOf returns block node n's tokens: the tree's copy.
func (t *Tree) tokensOf(n int32) []int32 {
	i := int(n) * t.blockSize
	return t.tokens[i : i+t.blockSize]
}

// child returns parent's child labelled by block, or none: its recent
// child, its first, or one from the edge table, asked only when parent has
// children there.
func (t *Tree) child(parent int32, block []int32) int32 {
	p := &t.nodes[parent]
	if c := p.recent; c != none && t.labelsFast(c, block) {
		return c
	}
	inTable := p.kids
	if c := p.first; c != none {
		if c != p.recent && t.labelsFast(c, block) {
			return c
		}
		inTable--
	}
	if inTable == 0 {
		return none
	}
	return t.findEdge(parent, block)
}

// newNode adds a child of parent holding page, labelled by a copy of block.
// The caller provides the node's allocator reference on page.
func (t *Tree) newNode(parent int32, block []int32, page int32) int32 {
	n := page
	if t.nodes[n].parent != none {
		panic(fmt.Sprintf("radix: block %d cached twice", page))
	}
	copy(t.tokensOf(n), block)
	t.nodes[n] = node{parent: parent, depth: t.nodes[parent].depth + 1, first: none, recent: none}
	p := &t.nodes[parent]
	if p.first == none {
		p.first = n
	} else {
		t.addEdge(n)
	}
	p.kids++
	p.recent = n
	t.cached++
	return n
}

// removeLeaf takes the childless node n out of the tree and drops the
// allocator reference it held. It reports whether that freed the block: a
// sequence forked from one of n's users holds a reference of its own.
func (t *Tree) removeLeaf(n int32) (freed bool) {
	if t.nodes[n].kids > 0 || t.nodes[n].users > 0 {
		panic("radix: removing a node that is in use")
	}
	if t.detached[n] {
		return t.dropDetached(n) // no parent lists it (forget.go)
	}
	p := t.nodes[n].parent
	if t.nodes[p].first == n {
		t.nodes[p].first = none
	} else {
		t.removeEdge(n) // while n still names its parent: the edge's key
	}
	t.nodes[n].parent = none
	t.nodes[p].kids--
	if t.nodes[p].recent == n {
		t.nodes[p].recent = none
	}
	if t.nodes[p].depth == 0 && p != t.root && t.nodes[p].kids == 0 {
		t.dropRoot(p) // a salt's last block: its tree goes too
	}
	t.cached--
	return t.alloc.Decref(n)
}

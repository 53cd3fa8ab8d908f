package radix

import "unsafe"

// node is one cached block and the edge into it.
type node struct {
	parent *node
	// tokens are the block's token ids, the node's own copy: the label of
	// the edge from parent, and the key of this node in parent.children.
	tokens   []int32
	children map[string]*node // by label(child.tokens); nil until the first child
	// recent is the child added or matched last, tried before the map: a
	// long shared prefix is a chain of nodes with one child each.
	recent *node
	block  int32
	depth  int // blocks from the root: this node's block is page depth-1
	// users counts the live sequences this node lends its block to. A user
	// of a node uses all of its ancestors too. users > 0 pins the node.
	users int
	// prev and next link the node into the tree's lru ring while users == 0,
	// and mean nothing otherwise.
	prev, next *node
	// salt names the tree a root belongs to; only roots (depth 0) set it.
	salt string
}

// label returns a string that shares block's memory: a map key for looking
// up a child by its tokens without copying or allocating. A label used as a
// stored key must come from tokens that never change, which is why each
// node keeps its own copy; labelling the caller's prompt in a stored key
// would change the key under the map when the caller reuses its buffer.
func label(block []int32) string {
	return unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(block))), 4*len(block))
}

// child returns n's child labelled by block, or nil.
func (n *node) child(block []int32) *node {
	key := label(block)
	if c := n.recent; c != nil && label(c.tokens) == key {
		return c
	}
	return n.children[key]
}

// newNode adds a child of parent holding page, labelled by a copy of block.
// The caller provides the node's allocator reference on page.
func (t *Tree) newNode(parent *node, block []int32, page int32) *node {
	var n *node
	if k := len(t.spare); k > 0 {
		n, t.spare = t.spare[k-1], t.spare[:k-1]
	} else {
		n = &node{}
	}
	n.parent, n.block, n.depth, n.users = parent, page, parent.depth+1, 0
	n.tokens = append(n.tokens[:0], block...)
	if parent.children == nil {
		parent.children = map[string]*node{}
	}
	parent.children[label(n.tokens)] = n
	parent.recent = n
	t.byBlock[page] = n
	t.nodes++
	return n
}

// removeLeaf takes the childless node n out of the tree and drops the
// allocator reference it held. It reports whether that freed the block: a
// sequence forked from one of n's users holds a reference of its own.
func (t *Tree) removeLeaf(n *node) (freed bool) {
	if len(n.children) > 0 || n.users > 0 {
		panic("radix: removing a node that is in use")
	}
	p := n.parent
	delete(p.children, label(n.tokens))
	if p.recent == n {
		p.recent = nil
	}
	if p.depth == 0 && p.salt != "" && len(p.children) == 0 {
		delete(t.salted, p.salt) // a salt's last block: its tree goes too
	}
	t.byBlock[n.block] = nil
	t.nodes--
	n.parent = nil
	t.spare = append(t.spare, n) // keeps tokens and children for reuse
	return t.alloc.Decref(n.block)
}

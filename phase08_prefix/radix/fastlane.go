package radix

import (
	"slices"
	"unsafe"
)

// The fast lanes: what MatchLen and Match run instead of the plain walks
// find and descend (tree.go), with the same results. Most of a lookup is a
// chain of nodes with one child each, and each node remembers the child
// added or matched last (node.recent). The fast lanes compare the next
// block against that child straight away, in a loop that calls nothing, so
// that the compiler keeps its variables in registers; only where the
// recent child is not the one do they fall back to a step of the walk
// (child), and then resume. A walk loop with a call in it made the
// compiler spill its variables at every step (docs/phase08_prefix.md,
// "The compact form").

// findFast is find with the fast lane.
func (t *Tree) findFast(salt string, tokens []int32) int32 {
	n := t.rootOf(salt, false)
	if n == none {
		return none
	}
	bs := t.blockSize
	for {
		n, tokens = t.followRecent(n, tokens)
		if len(tokens) < bs {
			return n
		}
		c := t.child(n, tokens[:bs])
		if c == none {
			return n
		}
		n, tokens = c, tokens[bs:]
	}
}

// followRecent follows recent children down from n while each is labelled
// by the next block of tokens, and returns where it stopped and the tokens
// left: the fast lane of findFast, since most of a lookup is such a chain.
// It calls nothing, so that the compiler keeps its loop in registers.
func (t *Tree) followRecent(n int32, tokens []int32) (int32, []int32) {
	nodes, bs := t.nodes, t.blockSize
	for len(tokens) >= bs {
		c := nodes[n].recent
		if c == none || !t.labelsFast(c, tokens) {
			break
		}
		n, tokens = c, tokens[bs:]
	}
	return n, tokens
}

// descendFast is descend with the fast lane: blocks ends up with the same
// nodes, and every node on the way with the same users and recent child.
func (t *Tree) descendFast(n int32, tokens, blocks []int32) (int32, []int32) {
	bs := t.blockSize
	blocks = slices.Grow(blocks, len(tokens)/bs) // room for every block: useRecent relies on it
	for {
		n, tokens, blocks = t.useRecent(n, tokens, blocks)
		if len(tokens) < bs {
			return n, blocks
		}
		c := t.child(n, tokens[:bs])
		if c == none {
			return n, blocks
		}
		t.nodes[n].recent = c // the child matched last
		t.use(c)
		blocks = append(blocks, c) // node c holds block c
		n, tokens = c, tokens[bs:]
	}
}

// useRecent is descendFast's fast lane, as followRecent is findFast's: it
// follows recent children down from n while each is labelled by the next
// block of tokens, makes the sequence a user of each and appends its
// block. blocks has room for all of them, so the loop needs no call.
func (t *Tree) useRecent(n int32, tokens, blocks []int32) (int32, []int32, []int32) {
	nodes, bs := t.nodes, t.blockSize
	for len(tokens) >= bs {
		c := nodes[n].recent
		if c == none || !t.labelsFast(c, tokens) {
			break
		}
		t.use(c)
		k := len(blocks)
		blocks = blocks[:k+1] // not append: descendFast made the room, and a call would slow the loop
		blocks[k] = c
		n, tokens = c, tokens[bs:]
	}
	return n, tokens, blocks
}

// labelsFast is labels, written for speed: eight bytes at a time, straight
// from the arena (n holds a block, so its tokens are there), in a loop the
// compiler inlines, where labels slices the arena and calls the runtime's
// general memory compare, which first picks its method by length. Every
// step of a lookup makes one such compare, and the fast lanes' loops stay
// free of calls only with this one.
func (t *Tree) labelsFast(n int32, block []int32) bool {
	size := uintptr(t.blockSize) * 4
	a := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.tokens)), uintptr(n)*size)
	b := unsafe.Pointer(unsafe.SliceData(block))
	i := uintptr(0)
	for ; i+8 <= size; i += 8 {
		if *(*uint64)(unsafe.Add(a, i)) != *(*uint64)(unsafe.Add(b, i)) {
			return false
		}
	}
	return i == size || *(*uint32)(unsafe.Add(a, i)) == *(*uint32)(unsafe.Add(b, i))
}

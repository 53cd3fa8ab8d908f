package radix

import "slices"

// Forget drops the cached prefix tokens under salt, from its last whole
// block down, with every node below it (kvcache.Forgetter); the blocks
// before it and its siblings stay cached.
//
// Under the tree-refcount contract a sequence reading a node's block holds
// no reference of its own: the node's is what keeps the block alive. So
// Forget removes, deepest first, only the nodes no live sequence uses, and
// leaves a node with users (and, since a user of a node uses its
// ancestors, every node above it) in the tree, where lookups still find
// it. A caller that must never lend the block again releases its users
// first, then forgets (the engine preempts them). It returns how many
// nodes left the tree.
func (t *Tree) Forget(salt string, tokens []int32) (dropped int) {
	want := len(tokens) / t.blockSize
	if want == 0 {
		return 0
	}
	top := t.find(salt, tokens[:want*t.blockSize])
	if top == none || int(t.nodes[top].depth) != want {
		return 0 // the block is not cached
	}
	var doomed []int32
	for b := range t.alloc.Total() {
		n := int32(b)
		if t.nodes[n].parent == none || t.nodes[n].depth < int32(want) {
			continue
		}
		a := n
		for t.nodes[a].depth > int32(want) {
			a = t.nodes[a].parent
		}
		if a == top {
			doomed = append(doomed, n)
		}
	}
	// Deepest first: each node is a leaf by the time its turn comes,
	// unless a child with users stays.
	slices.SortFunc(doomed, func(x, y int32) int { return int(t.nodes[y].depth - t.nodes[x].depth) })
	for _, n := range doomed {
		if t.nodes[n].users > 0 || t.nodes[n].kids > 0 {
			continue
		}
		t.unlink(n)
		t.removeLeaf(n)
		dropped++
	}
	return dropped
}

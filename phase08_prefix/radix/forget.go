package radix

import "slices"

// Forget drops the cached prefix tokens under salt, from its last whole
// block down, with every node below it (kvcache.Forgetter); the blocks
// before it and its siblings stay cached. It returns how many nodes
// lookups can no longer reach.
//
// Under the tree-refcount contract a sequence reading a node's block holds
// no reference of its own: the node's is what keeps the block alive. So
// the nodes no live sequence uses are removed, deepest first, and give
// their reference back at once. If the forgotten node itself still has
// users (then, since a user of a node uses its ancestors, the nodes below
// it that are still in use hang from it), it is detached instead: taken
// out of its parent's children, so no lookup reaches it or anything below
// it, while it keeps its reference, its users and its place on the users'
// paths, which Release walks up as before. An Insert by one of those users
// grows the detached subtree, which no lookup reaches either. Once its last
// user is gone, it is evictable like any node without users, and eviction
// drops it without touching the parent it left (removeLeaf, dropDetached).
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
		if t.nodes[n].parent == none || t.nodes[n].depth < int32(want) || t.detached[n] {
			continue
		}
		a := n
		for t.nodes[a].depth > int32(want) && !t.detached[a] {
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
	if t.nodes[top].parent != none { // still in use: detach it, and what hangs from it
		t.detach(top)
		for _, n := range doomed {
			if t.nodes[n].parent != none {
				dropped++
			}
		}
	}
	return dropped
}

// detach takes node n, which has users, out of its parent's children (see
// Forget).
func (t *Tree) detach(n int32) {
	p := t.nodes[n].parent
	if t.nodes[p].first == n {
		t.nodes[p].first = none
	} else {
		t.removeEdge(n) // while n still names its parent: the edge's key
	}
	t.nodes[p].kids--
	if t.nodes[p].recent == n {
		t.nodes[p].recent = none
	}
	if t.nodes[p].depth == 0 && p != t.root && t.nodes[p].kids == 0 {
		t.dropRoot(p) // the salt's tree is empty to every lookup
	}
	if t.detached == nil {
		t.detached = map[int32]bool{}
	}
	t.detached[n] = true
}

// dropDetached removes the detached node n, which has neither users nor
// children left, and drops its reference, as removeLeaf does for a node
// in the tree; its former parent is not told, since it no longer lists n.
func (t *Tree) dropDetached(n int32) (freed bool) {
	delete(t.detached, n)
	t.nodes[n].parent = none
	t.cached--
	return t.alloc.Decref(n)
}

package trie

// Forget drops the cached prefix tokens under salt, from its last whole
// block down, with every node below it (kvcache.Forgetter). The node
// holding that block is split first when the block starts inside it, so
// the blocks before it stay cached; siblings are untouched. The trie's
// reference on each dropped block goes; blocks lent to live sequences
// stay alive through the references Match took for them, which Release
// still drops, so the allocator's count stays "sequences plus one if a
// node lists it".
func (t *Trie) Forget(salt string, tokens []int32) (dropped int) {
	end := alignDown(len(tokens), t.bs)
	if end == 0 {
		return 0
	}
	target := end - t.bs // where the forgotten block starts
	n, done := t.rootOf(salt, false), 0
	for n != nil {
		child, k := t.step(n, tokens[done:end])
		if k == 0 {
			return 0 // the block is not cached
		}
		if done+len(child.tokens) <= target {
			if k < len(child.tokens) {
				return 0
			}
			n, done = child, done+k
			continue
		}
		if k < target-done+t.bs {
			return 0 // the prompt leaves child before the block
		}
		if cut := target - done; cut > 0 {
			t.split(child, cut) // child keeps the head, its new tail holds the block
			child = child.children[keyOf(tokens[target:end])]
		}
		parent := child.parent
		dropped = t.dropSubtree(child)
		if parent.parent == nil {
			t.dropIfEmpty(parent)
		}
		t.measure(parent)
		t.sync(parent)
		return dropped
	}
	return 0
}

// dropSubtree takes n and everything below it out of the trie, giving back
// the trie's reference on each of their blocks, and returns how many.
func (t *Trie) dropSubtree(n *node) int {
	dropped := 0
	for _, c := range n.children {
		dropped += t.dropSubtree(c)
	}
	t.drop(n.blocks)
	dropped += len(n.blocks)
	t.blocks -= len(n.blocks)
	t.detach(n)
	return dropped
}

package trie

import "container/heap"

// Evict frees up to n blocks that nothing but the trie holds and reports
// how many it freed: min(n, Evictable()). It takes the leaf the policy
// puts first and frees its blocks from the end, until n is reached or the
// leaf's last segment is empty; a long leaf thus loses only what is asked
// for and keeps its head cached. A leaf left with an idle segment, and a
// parent that became an idle leaf when its last child went, become
// candidates in turn. A parent left with one child and no holders of its
// own is merged with that child (see merge).
func (t *Trie) Evict(n int) int {
	if n <= 0 {
		return 0
	}
	freed := 0
	q := t.victims()
	var single []*node // nodes left with one child
	for freed < n && q.Len() > 0 {
		v := heap.Pop(q).(victim)
		freed += t.trim(v.n, n-freed)
		if len(v.n.blocks) > 0 {
			if freed == n {
				break // n reached inside this leaf
			}
			// A merged leaf lost a whole segment: what was its parent
			// node is the next candidate, as it would have been unmerged.
			if t.lastSegmentIdle(v.n) {
				heap.Push(q, v)
			}
			continue
		}
		parent := v.n.parent
		delete(parent.children, v.key)
		switch {
		case parent.parent != nil && len(parent.children) == 0 && t.lastSegmentIdle(parent):
			start := v.start - len(parent.blocks)
			heap.Push(q, victim{parent, keyOf(parent.tokens[:t.bs]), v.level - 1, start})
		case len(parent.children) == 1:
			single = append(single, parent)
		case parent.parent == nil:
			t.dropIfEmpty(parent) // a salt's last block is gone
		}
	}
	// Merging waits until the heap is gone: it may hold the child a merge
	// would absorb.
	t.mergeChains(single)
	t.evicted += freed
	return freed
}

// trim frees up to m blocks from the end of leaf n, within its last
// segment, and returns how many. Its tokens shrink with them, so it stays
// block-aligned; a segment emptied is forgotten.
func (t *Trie) trim(n *node, m int) int {
	from := n.lastSegment()
	m = min(m, len(n.blocks)-from)
	keep := len(n.blocks) - m
	t.drop(n.blocks[keep:])
	n.blocks, n.tokens = n.blocks[:keep], n.tokens[:keep*t.bs]
	if keep == from && len(n.joins) > 0 {
		n.joins = n.joins[:len(n.joins)-1]
	}
	t.blocks -= m
	return m
}

// Evictable returns how many blocks Evict could free now: the blocks of
// every node whose whole subtree nothing but the trie holds, and of a
// node whose subtree below it is idle, its idle trailing segments. It
// walks the trie, O(cached blocks).
func (t *Trie) Evictable() int {
	blocks := 0
	for _, r := range t.roots() {
		b, _ := t.evictable(r)
		blocks += b
	}
	return blocks
}

// evictable returns the blocks Evict could free in n's subtree and whether
// that is all of them.
func (t *Trie) evictable(n *node) (blocks int, all bool) {
	all = true
	for _, c := range n.children {
		b, ok := t.evictable(c)
		blocks += b
		all = all && ok
	}
	if !all {
		return blocks, false
	}
	// Segments from the last: each goes once those after it have gone.
	end := len(n.blocks)
	for i := len(n.joins); i >= 0; i-- {
		from := 0
		if i > 0 {
			from = n.joins[i-1]
		}
		if !t.idle(n.blocks[from:end]) {
			return blocks, false
		}
		blocks += end - from
		end = from
	}
	return blocks, true
}

// unpinned reports whether the trie's reference is the only one on every
// block of n: no live sequence reads any of them.
func (t *Trie) unpinned(n *node) bool { return t.idle(n.blocks) }

// lastSegmentIdle reports whether nobody but the trie holds a block of n's
// last segment: whether n, as a leaf, can lose blocks.
func (t *Trie) lastSegmentIdle(n *node) bool {
	return len(n.blocks) > 0 && t.idle(n.blocks[n.lastSegment():])
}

// idle reports whether the trie's reference is the only one on every block.
func (t *Trie) idle(blocks []int32) bool {
	for _, b := range blocks {
		if t.alloc.Refs(b) != 1 {
			return false
		}
	}
	return true
}

// victims returns the evictable leaves in a heap ordered by the policy.
func (t *Trie) victims() *victimQueue {
	q := &victimQueue{policy: t.policy}
	var walk func(n *node, level, start int)
	walk = func(n *node, level, start int) {
		for key, c := range n.children {
			if len(c.children) == 0 && t.lastSegmentIdle(c) {
				q.items = append(q.items, victim{c, key, level + 1, start})
			}
			walk(c, level+1, start+len(c.blocks))
		}
	}
	for _, r := range t.roots() {
		walk(r, 0, 0)
	}
	heap.Init(q)
	return q
}

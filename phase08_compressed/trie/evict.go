package trie

import "container/heap"

// Evict frees up to n blocks that nothing but the trie holds and reports
// how many it freed: min(n, Evictable()). It takes the leaf the policy
// puts first and frees its blocks from the end, until n is reached or the
// leaf is empty; a long leaf thus loses only what is asked for and keeps
// its head cached. An empty leaf is removed, and its parent, if that made
// it an evictable leaf, becomes a candidate in turn.
func (t *Trie) Evict(n int) int {
	if n <= 0 {
		return 0
	}
	freed := 0
	q := t.victims()
	for freed < n && q.Len() > 0 {
		v := heap.Pop(q).(victim)
		freed += t.trim(v.n, n-freed)
		if len(v.n.blocks) > 0 {
			break // n reached inside this leaf
		}
		parent := v.n.parent
		delete(parent.children, v.key)
		if parent != t.root && len(parent.children) == 0 && t.unpinned(parent) {
			start := v.start - len(parent.blocks)
			heap.Push(q, victim{parent, keyOf(parent.tokens[:t.bs]), v.level - 1, start})
		}
	}
	t.evicted += freed
	return freed
}

// trim frees up to m blocks from the end of leaf n and returns how many.
// Its tokens shrink with them, so it stays block-aligned.
func (t *Trie) trim(n *node, m int) int {
	m = min(m, len(n.blocks))
	keep := len(n.blocks) - m
	t.drop(n.blocks[keep:])
	n.blocks, n.tokens = n.blocks[:keep], n.tokens[:keep*t.bs]
	t.blocks -= m
	return m
}

// Evictable returns how many blocks Evict could free now: the blocks of
// every node whose whole subtree nothing but the trie holds. It walks the
// trie, O(cached blocks).
func (t *Trie) Evictable() int {
	blocks, _ := t.evictable(t.root)
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
	if !all || !t.unpinned(n) {
		return blocks, false
	}
	return blocks + len(n.blocks), true
}

// unpinned reports whether the trie's reference is the only one on every
// block of n: no live sequence reads any of them.
func (t *Trie) unpinned(n *node) bool {
	for _, b := range n.blocks {
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
			if len(c.children) == 0 && t.unpinned(c) {
				q.items = append(q.items, victim{c, key, level + 1, start})
			}
			walk(c, level+1, start+len(c.blocks))
		}
	}
	walk(t.root, 0, 0)
	heap.Init(q)
	return q
}

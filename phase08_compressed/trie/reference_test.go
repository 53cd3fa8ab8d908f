package trie

import "container/heap"

// The eviction order as the trie computed it before it kept its
// candidates up to date: a heap built from a walk of every node on each
// Evict. The tests compare the kept heap's choices with it, and the
// reproductions in bugs_test.go evict through it.

// victim is an evictable leaf and where it sits.
type victim struct {
	n     *node
	key   uint64 // its key in its parent's children
	level int    // nodes from the root
	start int    // blocks above it
}

func (v victim) leaf() Leaf {
	return Leaf{Depth: v.start + len(v.n.blocks), Level: v.level, LastUse: v.n.lastUse, Refs: v.n.refs}
}

// victimQueue is a heap of victims, first in policy order at the top,
// ties in block-id order.
type victimQueue struct {
	policy Policy
	items  []victim
}

func (q *victimQueue) Len() int { return len(q.items) }

func (q *victimQueue) Less(i, j int) bool {
	a, b := q.items[i].leaf(), q.items[j].leaf()
	switch {
	case q.policy.Before(a, b):
		return true
	case q.policy.Before(b, a):
		return false
	}
	return q.items[i].n.blocks[0] < q.items[j].n.blocks[0]
}

func (q *victimQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }

func (q *victimQueue) Push(x any) { q.items = append(q.items, x.(victim)) }

func (q *victimQueue) Pop() any {
	v := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return v
}

// victims returns the evictable leaves in a heap ordered by the policy,
// found by walking every node.
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

// rebuild sets the eviction bookkeeping from a walk of the nodes reachable
// from the roots, as the trie computed it before it kept it: the buggy
// variants of bugs_test.go change the trie without keeping it.
func (t *Trie) rebuild() {
	for _, n := range t.leaves.items {
		n.hidx = 0
	}
	t.leaves.items = t.leaves.items[:0]
	t.evictable = 0
	var walk func(n *node, end int) (busy bool)
	walk = func(n *node, end int) bool {
		n.end, n.busyKids = end+len(n.blocks), 0
		for key, c := range n.children {
			c.key = key
			if walk(c, n.end) {
				n.busyKids++
			}
		}
		t.measure(n)
		n.counted, n.hidx = 0, 0
		n.inBusy = !n.full || n.busyKids > 0
		if n.busyKids == 0 {
			n.counted = n.tail
			t.evictable += n.tail
		}
		if n.parent != nil && len(n.children) == 0 && n.tail > 0 {
			t.leaves.update(n)
		}
		return n.inBusy
	}
	for _, r := range t.roots() {
		walk(r, 0)
	}
}

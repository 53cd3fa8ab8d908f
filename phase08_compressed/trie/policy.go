package trie

// A Policy decides which evictable leaf loses its last block first.
type Policy interface {
	// Before reports whether leaf a should lose a block before leaf b.
	Before(a, b Leaf) bool
}

// Leaf describes an evictable leaf to a Policy.
type Leaf struct {
	// Depth is where the leaf ends, in blocks from the root: the length
	// of the longest cached prefix it completes. It shrinks as the leaf
	// loses blocks.
	Depth int
	// Level counts the nodes from the root down to the leaf (the root's
	// children are at level 1). A split pushes a subtree one level down,
	// so levels are computed at eviction time, never stored.
	Level int
	// LastUse is the logical time of the last Match or Insert that
	// reached the leaf; smaller is older.
	LastUse int64
	// Refs counts the sequences that have used the leaf: the one whose
	// Insert created it and every Match that lent any of its blocks. A
	// leaf merged with its parent's node carries the parent's count.
	Refs int
}

var (
	// DeepestFirst takes blocks from the deepest leaf first and, among
	// leaves as deep, from the least recently used. Depth is counted in
	// blocks, not nodes: the first blocks of many prompts (a shared system
	// prompt) go last, even when a deeper leaf was used more recently.
	DeepestFirst Policy = deepestFirst{}
	// LRU takes blocks from the least recently used leaf first, whatever
	// its depth.
	LRU Policy = lru{}
	// Priority is LRU weighted by reference count: blocks go first from
	// the leaf with the smallest LastUse × Refs, so a prefix many
	// sequences used outlives one used once a little more recently. Ties
	// go to the least recently used.
	Priority Policy = priority{}
	// SizeAware takes blocks from the shortest cached prefix first: the
	// leaf of smallest Depth, and among those, the least recently used.
	// It keeps long prefixes, each of which saves the most compute per
	// hit, at the cost of the short ones.
	SizeAware Policy = sizeAware{}
)

type priority struct{}

func (priority) Before(a, b Leaf) bool {
	wa, wb := a.LastUse*int64(a.Refs), b.LastUse*int64(b.Refs)
	if wa != wb {
		return wa < wb
	}
	return a.LastUse < b.LastUse
}

type sizeAware struct{}

func (sizeAware) Before(a, b Leaf) bool {
	if a.Depth != b.Depth {
		return a.Depth < b.Depth
	}
	return a.LastUse < b.LastUse
}

type deepestFirst struct{}

func (deepestFirst) Before(a, b Leaf) bool {
	if a.Depth != b.Depth {
		return a.Depth > b.Depth
	}
	return a.LastUse < b.LastUse
}

type lru struct{}

func (lru) Before(a, b Leaf) bool { return a.LastUse < b.LastUse }

// leafOf describes n, an evictable leaf, to the policy. Its level is
// counted now: a split above n pushes it down without touching it.
func leafOf(n *node) Leaf {
	level := 0
	for p := n; p.parent != nil; p = p.parent {
		level++
	}
	return Leaf{Depth: n.end, Level: level, LastUse: n.lastUse, Refs: n.refs}
}

// leafHeap holds the evictable leaves, first in policy order at the top.
// Leaves the policy cannot tell apart go in block-id order, so eviction is
// deterministic, and the order is total: the top is the one leaf the
// policy puts first, whatever the heap's history. Each node knows its
// place (hidx, 0 when absent), so a leaf whose key changed is fixed and
// one that stopped being a candidate is removed in O(log n).
type leafHeap struct {
	policy Policy
	items  []*node
}

func (q *leafHeap) less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	la, lb := leafOf(a), leafOf(b)
	switch {
	case q.policy.Before(la, lb):
		return true
	case q.policy.Before(lb, la):
		return false
	}
	return a.blocks[0] < b.blocks[0]
}

func (q *leafHeap) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].hidx = i + 1
	q.items[j].hidx = j + 1
}

func (q *leafHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *leafHeap) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(q.items) {
			break
		}
		m := l
		if r := l + 1; r < len(q.items) && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.swap(i, m)
		i = m
	}
	return i > start
}

// update puts n in the heap, or restores the order after n's key changed.
func (q *leafHeap) update(n *node) {
	if n.hidx == 0 {
		q.items = append(q.items, n)
		n.hidx = len(q.items)
		q.up(len(q.items) - 1)
		return
	}
	if i := n.hidx - 1; !q.down(i) {
		q.up(i)
	}
}

// remove takes n out of the heap if it is there.
func (q *leafHeap) remove(n *node) {
	if n.hidx == 0 {
		return
	}
	i, last := n.hidx-1, len(q.items)-1
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = nil
	q.items = q.items[:last]
	n.hidx = 0
	if i != last {
		if !q.down(i) {
			q.up(i)
		}
	}
}

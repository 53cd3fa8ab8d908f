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

// victimQueue is a heap of victims, first in policy order at the top.
// Leaves the policy cannot tell apart go in block-id order, so eviction is
// deterministic.
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

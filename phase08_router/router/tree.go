package router

import (
	"container/heap"
	"sync"
)

// Tree is the prefix policy's memory: a token-level radix tree of the
// prompts routed so far, each node marked with the owners it was routed
// to and when. Every node on an inserted prompt's path is marked, so an
// owner marked on a node is marked on all its ancestors; the longest
// prefix an owner holds is the depth of the deepest marked node the
// prompt reaches.
//
// An owner is a replica, or one slot of a replica. A replica's marks add
// up: it keeps every prompt routed to it until it is over its bound, when
// its least recently routed leaves lose its mark, the way the replica's
// own cache would evict. A slot's marks do not add up: a llama-server
// slot holds the KV of one sequence, the last one it ran, so routing a
// prompt to a slot first takes the slot's mark off its previous path
// (InsertSlot). A node no owner marks is deleted.
type Tree struct {
	mu    sync.Mutex
	root  *node
	clock uint64          // logical time of the last insert
	size  map[Owner]int   // tokens marked per owner
	leaf  map[Owner]*node // a slot's deepest marked node: the end of its one path
	max   int
}

// Owner is who holds a path of the tree: a replica (Slot == AnySlot) or
// one slot of it.
type Owner struct {
	Replica, Slot int
}

// AnySlot is the Slot of a replica-wide owner.
const AnySlot = -1

type node struct {
	edge     []int32 // tokens from the parent to this node
	parent   *node
	children map[int32]*node  // by first token of the child's edge
	marks    map[Owner]uint64 // owner → clock of the last insert through here
}

// NewTree returns an empty tree holding at most maxTokens tokens per
// replica (0: unbounded).
func NewTree(maxTokens int) *Tree {
	return &Tree{root: newNode(nil, nil), size: map[Owner]int{}, leaf: map[Owner]*node{}, max: maxTokens}
}

func newNode(edge []int32, parent *node) *node {
	return &node{edge: edge, parent: parent, children: map[int32]*node{}, marks: map[Owner]uint64{}}
}

// commonLen is the length of the common prefix of a and b.
func commonLen(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Insert records that prompt was routed to replica, then evicts the
// replica's oldest leaves if it is over the bound.
func (t *Tree) Insert(prompt []int32, replica int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := Owner{replica, AnySlot}
	t.insert(prompt, o)
	if t.max > 0 && t.size[o] > t.max {
		t.evict(o)
	}
}

// InsertSlot records that prompt ran in slot of replica: the slot now
// holds prompt and nothing else, so the mark comes off the slot's
// previous path first (the tokens that path shares with prompt are marked
// again at once). Slots are not bounded by maxTokens: each holds one
// prompt.
func (t *Tree) InsertSlot(prompt []int32, replica, slot int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := Owner{replica, slot}
	t.unmarkPath(o)
	if last := t.insert(prompt, o); last != t.root {
		t.leaf[o] = last
	}
}

// insert marks prompt's path for o at a new clock and returns the last
// node of the path, which ends exactly where prompt ends.
func (t *Tree) insert(prompt []int32, o Owner) *node {
	t.clock++
	n := t.root
	for i := 0; i < len(prompt); {
		c := n.children[prompt[i]]
		if c == nil {
			c = newNode(append([]int32(nil), prompt[i:]...), n)
			n.children[prompt[i]] = c
			t.mark(c, o)
			return c
		}
		k := commonLen(c.edge, prompt[i:])
		if k < len(c.edge) {
			t.split(c, k)
		}
		t.mark(c, o)
		i += k
		n = c
	}
	return n
}

// mark marks n for o at the current clock.
func (t *Tree) mark(n *node, o Owner) {
	if _, ok := n.marks[o]; !ok {
		t.size[o] += len(n.edge)
	}
	n.marks[o] = t.clock
}

// unmark takes o's mark off n and deletes n if nobody marks it and it has
// no children.
func (t *Tree) unmark(n *node, o Owner) {
	if _, ok := n.marks[o]; !ok {
		return
	}
	delete(n.marks, o)
	t.size[o] -= len(n.edge)
	if len(n.marks) == 0 && len(n.children) == 0 && n != t.root {
		delete(n.parent.children, n.edge[0])
	}
}

// unmarkPath takes a slot's mark off its whole path, deepest node first.
func (t *Tree) unmarkPath(o Owner) {
	for n := t.leaf[o]; n != nil && n != t.root; n = n.parent {
		t.unmark(n, o)
	}
	delete(t.leaf, o)
	delete(t.size, o)
}

// split cuts n's edge after k tokens: n keeps the head, a new child takes
// the tail together with n's children and a copy of n's marks.
func (t *Tree) split(n *node, k int) {
	tail := newNode(n.edge[k:], n)
	tail.children = n.children
	for o, at := range n.marks {
		tail.marks[o] = at
		// A slot whose path ended at n now ends at the tail, which holds
		// the rest of the tokens it ran.
		if t.leaf[o] == n {
			t.leaf[o] = tail
		}
	}
	// The grandchildren now hang below the tail; their parent pointer must
	// say so, or eviction would walk up to the wrong node.
	for _, g := range tail.children {
		g.parent = tail
	}
	n.edge = n.edge[:k:k]
	n.children = map[int32]*node{tail.edge[0]: tail}
}

// walk follows prompt down the tree and calls f with every node the prompt
// reaches and how many of its tokens the path up to that node covers.
func (t *Tree) walk(prompt []int32, f func(n *node, depth int)) {
	n := t.root
	for i := 0; i < len(prompt); {
		c := n.children[prompt[i]]
		if c == nil {
			return
		}
		k := commonLen(c.edge, prompt[i:])
		f(c, i+k)
		i += k
		if k < len(c.edge) {
			return
		}
		n = c
	}
}

// Match returns, for each replica, how many leading tokens of prompt were
// routed to it before (replicas with none are absent).
func (t *Tree) Match(prompt []int32) map[int]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]int{}
	t.walk(prompt, func(n *node, depth int) {
		for o := range n.marks {
			if o.Slot == AnySlot {
				out[o.Replica] = depth
			}
		}
	})
	return out
}

// MatchSlots returns, for each slot of replica, how many leading tokens of
// prompt the slot's last prompt shares with it (slots with none are
// absent).
func (t *Tree) MatchSlots(prompt []int32, replica int) map[int]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]int{}
	t.walk(prompt, func(n *node, depth int) {
		for o := range n.marks {
			if o.Replica == replica && o.Slot != AnySlot {
				out[o.Slot] = depth
			}
		}
	})
	return out
}

// SlotHolds returns the prompt slot of replica last ran, as the tree
// remembers it (nil if none).
func (t *Tree) SlotHolds(replica, slot int) []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts [][]int32
	for n := t.leaf[Owner{replica, slot}]; n != nil && n != t.root; n = n.parent {
		parts = append(parts, n.edge)
	}
	var out []int32
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i]...)
	}
	return out
}

// ClearSlot forgets what slot of replica holds: it ran a prompt this tree
// does not hold (another tenant's).
func (t *Tree) ClearSlot(replica, slot int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unmarkPath(Owner{replica, slot})
}

// SlotClock returns when slot of replica last ran a prompt of this tree
// (the tree's logical clock; 0 if never).
func (t *Tree) SlotClock(replica, slot int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := Owner{replica, slot}
	if n := t.leaf[o]; n != nil {
		return n.marks[o]
	}
	return 0
}

// Size returns the tokens the tree holds for replica.
func (t *Tree) Size(replica int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size[Owner{replica, AnySlot}]
}

// Remove forgets everything routed to replica and its slots: it left the
// fleet, and its cache with it.
func (t *Tree) Remove(replica int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children {
			walk(c)
		}
		if n == t.root {
			return
		}
		for o := range n.marks {
			if o.Replica == replica {
				delete(n.marks, o)
			}
		}
		if len(n.marks) == 0 && len(n.children) == 0 {
			delete(n.parent.children, n.edge[0])
		}
	}
	walk(t.root)
	for o := range t.size {
		if o.Replica == replica {
			delete(t.size, o)
			delete(t.leaf, o)
		}
	}
}

// isLeafOf reports whether n is marked for o and none of its children is.
func isLeafOf(n *node, o Owner) bool {
	if _, ok := n.marks[o]; !ok {
		return false
	}
	for _, c := range n.children {
		if _, ok := c.marks[o]; ok {
			return false
		}
	}
	return true
}

// evict unmarks replica-wide owner o's least recently routed leaves until
// its tokens fit the bound. A parent is at least as recent as its children
// (every insert marks the whole path), so a parent that becomes a leaf can
// join the heap and still come out in order. A node a slot still marks
// stays in the tree for the slot.
func (t *Tree) evict(o Owner) {
	h := &leafHeap{owner: o}
	var collect func(n *node)
	collect = func(n *node) {
		for _, c := range n.children {
			collect(c)
		}
		if n != t.root && isLeafOf(n, o) {
			h.nodes = append(h.nodes, n)
		}
	}
	collect(t.root)
	heap.Init(h)
	for t.size[o] > t.max && h.Len() > 0 {
		n := heap.Pop(h).(*node)
		p := n.parent
		t.unmark(n, o)
		if p != t.root && isLeafOf(p, o) {
			heap.Push(h, p)
		}
	}
}

// leafHeap orders one owner's leaves by the time they were last routed.
type leafHeap struct {
	owner Owner
	nodes []*node
}

func (h *leafHeap) Len() int { return len(h.nodes) }
func (h *leafHeap) Less(i, j int) bool {
	return h.nodes[i].marks[h.owner] < h.nodes[j].marks[h.owner]
}
func (h *leafHeap) Swap(i, j int) { h.nodes[i], h.nodes[j] = h.nodes[j], h.nodes[i] }
func (h *leafHeap) Push(x any)    { h.nodes = append(h.nodes, x.(*node)) }
func (h *leafHeap) Pop() any {
	n := h.nodes[len(h.nodes)-1]
	h.nodes = h.nodes[:len(h.nodes)-1]
	return n
}

package router

import (
	"container/heap"
	"sync"
)

// Tree is the prefix policy's memory: a token-level radix tree of the
// prompts routed so far, each node marked with the replicas it was routed
// to and when. Every node on an inserted prompt's path is marked, so a
// replica marked on a node is marked on all its ancestors; the longest
// prefix a replica holds is the depth of the deepest marked node the
// prompt reaches.
//
// The tree is bounded per replica: when the tokens marked for one replica
// exceed the bound, that replica's least recently routed leaves lose its
// mark until it fits again, the way the replica's own cache would evict.
// A node no replica marks is deleted.
type Tree struct {
	mu    sync.Mutex
	root  *node
	clock uint64      // logical time of the last insert
	size  map[int]int // tokens marked per replica
	max   int
}

type node struct {
	edge     []int32 // tokens from the parent to this node
	parent   *node
	children map[int32]*node // by first token of the child's edge
	marks    map[int]uint64  // replica → clock of the last insert through here
}

// NewTree returns an empty tree holding at most maxTokens tokens per
// replica (0: unbounded).
func NewTree(maxTokens int) *Tree {
	return &Tree{root: &node{children: map[int32]*node{}, marks: map[int]uint64{}}, size: map[int]int{}, max: maxTokens}
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
	t.clock++
	n := t.root
	for i := 0; i < len(prompt); {
		c := n.children[prompt[i]]
		if c == nil {
			c = &node{edge: append([]int32(nil), prompt[i:]...), parent: n, children: map[int32]*node{}, marks: map[int]uint64{}}
			n.children[prompt[i]] = c
			t.mark(c, replica)
			break
		}
		k := commonLen(c.edge, prompt[i:])
		if k < len(c.edge) {
			t.split(c, k)
		}
		t.mark(c, replica)
		i += k
		n = c
	}
	if t.max > 0 && t.size[replica] > t.max {
		t.evict(replica)
	}
}

// mark marks n for replica at the current clock.
func (t *Tree) mark(n *node, replica int) {
	if _, ok := n.marks[replica]; !ok {
		t.size[replica] += len(n.edge)
	}
	n.marks[replica] = t.clock
}

// split cuts n's edge after k tokens: n keeps the head, a new child takes
// the tail together with n's children and a copy of n's marks.
func (t *Tree) split(n *node, k int) {
	tail := &node{edge: n.edge[k:], parent: n, children: n.children, marks: make(map[int]uint64, len(n.marks))}
	for r, at := range n.marks {
		tail.marks[r] = at
	}
	// The grandchildren now hang below the tail; their parent pointer must
	// say so, or eviction would walk up to the wrong node.
	for _, g := range tail.children {
		g.parent = tail
	}
	n.edge = n.edge[:k:k]
	n.children = map[int32]*node{tail.edge[0]: tail}
}

// Match returns, for each replica, how many leading tokens of prompt were
// routed to it before (replicas with none are absent).
func (t *Tree) Match(prompt []int32) map[int]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int]int{}
	n := t.root
	for i := 0; i < len(prompt); {
		c := n.children[prompt[i]]
		if c == nil {
			break
		}
		k := commonLen(c.edge, prompt[i:])
		for r := range c.marks {
			out[r] = i + k
		}
		i += k
		if k < len(c.edge) {
			break
		}
		n = c
	}
	return out
}

// Size returns the tokens the tree holds for replica.
func (t *Tree) Size(replica int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size[replica]
}

// Remove forgets everything routed to replica: it left the fleet, and
// its cache with it.
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
		delete(n.marks, replica)
		if len(n.marks) == 0 && len(n.children) == 0 {
			delete(n.parent.children, n.edge[0])
		}
	}
	walk(t.root)
	delete(t.size, replica)
}

// isLeafOf reports whether n is marked for replica and none of its
// children is.
func isLeafOf(n *node, replica int) bool {
	if _, ok := n.marks[replica]; !ok {
		return false
	}
	for _, c := range n.children {
		if _, ok := c.marks[replica]; ok {
			return false
		}
	}
	return true
}

// evict unmarks replica's least recently routed leaves until its tokens
// fit the bound. A parent is at least as recent as its children (every
// insert marks the whole path), so a parent that becomes a leaf can join
// the heap and still come out in order.
func (t *Tree) evict(replica int) {
	h := &leafHeap{replica: replica}
	var collect func(n *node)
	collect = func(n *node) {
		for _, c := range n.children {
			collect(c)
		}
		if n != t.root && isLeafOf(n, replica) {
			h.nodes = append(h.nodes, n)
		}
	}
	collect(t.root)
	heap.Init(h)
	for t.size[replica] > t.max && h.Len() > 0 {
		n := heap.Pop(h).(*node)
		delete(n.marks, replica)
		t.size[replica] -= len(n.edge)
		p := n.parent
		if len(n.marks) == 0 && len(n.children) == 0 {
			delete(p.children, n.edge[0])
		}
		if p != t.root && isLeafOf(p, replica) {
			heap.Push(h, p)
		}
	}
}

// leafHeap orders one replica's leaves by the time they were last routed.
type leafHeap struct {
	replica int
	nodes   []*node
}

func (h *leafHeap) Len() int { return len(h.nodes) }
func (h *leafHeap) Less(i, j int) bool {
	return h.nodes[i].marks[h.replica] < h.nodes[j].marks[h.replica]
}
func (h *leafHeap) Swap(i, j int) { h.nodes[i], h.nodes[j] = h.nodes[j], h.nodes[i] }
func (h *leafHeap) Push(x any)    { h.nodes = append(h.nodes, x.(*node)) }
func (h *leafHeap) Pop() any {
	n := h.nodes[len(h.nodes)-1]
	h.nodes = h.nodes[:len(h.nodes)-1]
	return n
}

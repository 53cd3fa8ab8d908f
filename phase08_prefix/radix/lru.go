package radix

import "fmt"

// The lru ring holds exactly the nodes without users, least recently used
// first. A node joins it when its last user leaves, and leaves it when a
// sequence matches it again.
//
// Every node on the ring comes after all of its descendants: the nodes
// below a node without users have none either, and so are on the ring, and
// each way of joining keeps the order. Release walks a sequence's path from
// its deepest node up, so a node joins after the descendants it leaves
// there; a node Insert creates without a user joins right before its parent
// when the parent is on the ring. Hence the front is always a leaf, Evict
// is a pop from the front, and cascading to a parent that becomes a leaf
// needs no extra step.
//
// The ring is linked by node indices (node.prev, node.next) through a
// sentinel node of its own, Tree.ring, that holds no block.

// Evict frees up to n blocks, least recently used first, and returns how
// many it freed.
func (t *Tree) Evict(n int) int {
	freed := 0
	for freed < n && t.idle > 0 {
		v := t.nodes[t.ring].next
		t.unlink(v)
		if t.removeLeaf(v) {
			freed++
		}
		t.evicted++
	}
	return freed
}

// Evictable returns how many blocks Evict could free now: the nodes with no
// user. (It overcounts while the sequence that wrote a block still holds it
// too: a block Insert cached without adopting it, or one a forked sequence
// shares. Evicting such a node frees nothing until that sequence ends.)
func (t *Tree) Evictable() int { return t.idle }

// use records one more user of n.
func (t *Tree) use(n int32) {
	nd := &t.nodes[n]
	if nd.users == 0 {
		t.unlink(n)
	}
	nd.users++
}

// rest puts n, which has no user, on the ring: right before its parent if
// the parent is there, else at the back, as the most recently used.
func (t *Tree) rest(n int32) {
	nodes := t.nodes
	nd := &nodes[n]
	at := t.ring
	if p := &nodes[nd.parent]; p.users == 0 && p.depth > 0 {
		at = nd.parent
	}
	prev := nodes[at].prev
	nd.prev, nd.next = prev, at
	nodes[prev].next, nodes[at].prev = n, n
	t.idle++
}

// unlink takes n off the ring.
func (t *Tree) unlink(n int32) {
	nodes := t.nodes
	prev, next := nodes[n].prev, nodes[n].next
	nodes[prev].next, nodes[next].prev = next, prev
	t.idle--
}

// AuditCache checks the ring against a scan of every node: it holds
// exactly the nodes without users (so Evictable, idle, is right), and each
// comes after all of its descendants (so Evict's front is a leaf). It also
// checks the children: every cached node is found under its parent, from
// the edge table unless it is the parent's first child (which the table
// must not hold), and every node's count of children is right. The conformance suite calls it after every step
// (cachetest's Harness.Audit); it costs O(allocator blocks) and changes
// nothing.
func (t *Tree) AuditCache() error {
	pos := make([]int, len(t.nodes)) // 1 + place on the ring; 0: not on it
	onRing := 0
	for n := t.nodes[t.ring].next; n != t.ring; n = t.nodes[n].next {
		if n < 0 || int(n) >= t.alloc.Total() {
			return fmt.Errorf("radix: the lru ring links to node %d, which holds no block", n)
		}
		if users := t.nodes[n].users; users != 0 {
			return fmt.Errorf("radix: block %d is on the lru ring with %d users", n, users)
		}
		if pos[n] != 0 {
			return fmt.Errorf("radix: block %d is on the lru ring twice", n)
		}
		onRing++
		pos[n] = onRing
	}
	if onRing != t.idle {
		return fmt.Errorf("radix: Evictable is %d, the ring holds %d nodes", t.idle, onRing)
	}
	idle, cached, firsts, detached := 0, 0, 0, 0
	kids := make([]int32, len(t.nodes))
	for b := range t.alloc.Total() {
		n := int32(b)
		nd := t.nodes[n]
		if nd.parent == none {
			continue
		}
		cached++
		if t.detached[n] { // forget.go: no parent lists it
			detached++
			if t.child(nd.parent, t.tokensOf(n)) == n {
				return fmt.Errorf("radix: detached block %d is still found under its parent", n)
			}
		} else {
			kids[nd.parent]++
			want := n // in the edge table, unless it is its parent's first
			if t.nodes[nd.parent].first == n {
				want = none
				firsts++
			}
			if got := t.findEdge(nd.parent, t.tokensOf(n)); got != want {
				return fmt.Errorf("radix: the edge table gives %d for block %d, want %d", got, n, want)
			}
			if got := t.child(nd.parent, t.tokensOf(n)); got != n {
				return fmt.Errorf("radix: block %d is not found under its parent (lookup gives %d)", n, got)
			}
			if want := t.nodes[nd.parent].depth + 1; nd.depth != want {
				return fmt.Errorf("radix: block %d has depth %d, its parent %d", n, nd.depth, want-1)
			}
		}
		if nd.users != 0 {
			continue
		}
		idle++
		if pos[n] == 0 {
			return fmt.Errorf("radix: block %d has no users but is not on the ring", n)
		}
		if p := t.nodes[nd.parent]; !t.detached[n] && p.depth > 0 && p.users == 0 && pos[nd.parent] < pos[n] {
			return fmt.Errorf("radix: block %d is on the ring after its parent, block %d", n, nd.parent)
		}
	}
	if idle != t.idle {
		return fmt.Errorf("radix: Evictable is %d, a recount finds %d nodes without users", t.idle, idle)
	}
	if cached != t.cached {
		return fmt.Errorf("radix: Cached is %d, a recount finds %d nodes", t.cached, cached)
	}
	for n, want := range kids {
		if t.nodes[n].kids != want {
			return fmt.Errorf("radix: node %d counts %d children, a recount finds %d", n, t.nodes[n].kids, want)
		}
		if r := t.nodes[n].recent; r != none && t.nodes[r].parent != int32(n) {
			return fmt.Errorf("radix: node %d's recent child %d is not its child", n, r)
		}
		if f := t.nodes[n].first; f != none && t.nodes[f].parent != int32(n) {
			return fmt.Errorf("radix: node %d's first child %d is not its child", n, f)
		}
	}
	edges := 0
	for _, e := range t.edges {
		if e.node != none {
			edges++
		}
	}
	if edges != cached-firsts-detached || edges != t.inTable {
		return fmt.Errorf("radix: the edge table holds %d edges (it counts %d) for %d nodes, %d of them first children", edges, t.inTable, cached, firsts)
	}
	return nil
}

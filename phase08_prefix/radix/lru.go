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

// Evict frees up to n blocks, least recently used first, and returns how
// many it freed.
func (t *Tree) Evict(n int) int {
	freed := 0
	for freed < n && t.idle > 0 {
		v := t.lru.next
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
func (t *Tree) use(n *node) {
	if n.users == 0 {
		t.unlink(n)
	}
	n.users++
}

// unuse records that one user of n is gone.
func (t *Tree) unuse(n *node) {
	n.users--
	switch {
	case n.users < 0:
		panic("radix: node released more often than used")
	case n.users == 0:
		t.rest(n)
	}
}

// rest puts n, which has no user, on the ring: right before its parent if
// the parent is there, else at the back, as the most recently used.
func (t *Tree) rest(n *node) {
	at := &t.lru
	if p := n.parent; p.users == 0 && p.depth > 0 {
		at = p
	}
	n.prev, n.next = at.prev, at
	n.prev.next, at.prev = n, n
	t.idle++
}

func (t *Tree) unlink(n *node) {
	n.prev.next, n.next.prev = n.next, n.prev
	t.idle--
}

// AuditCache checks the ring against a scan of every node: it holds
// exactly the nodes without users (so Evictable, idle, is right), and each
// comes after all of its descendants (so Evict's front is a leaf). The
// conformance suite calls it after every step (cachetest's Harness.Audit);
// it costs O(cached blocks) and changes nothing.
func (t *Tree) AuditCache() error {
	pos := map[*node]int{}
	for n := t.lru.next; n != &t.lru; n = n.next {
		if n.users != 0 {
			return fmt.Errorf("radix: block %d is on the lru ring with %d users", n.block, n.users)
		}
		if _, dup := pos[n]; dup {
			return fmt.Errorf("radix: block %d is on the lru ring twice", n.block)
		}
		pos[n] = len(pos)
	}
	if len(pos) != t.idle {
		return fmt.Errorf("radix: Evictable is %d, the ring holds %d nodes", t.idle, len(pos))
	}
	idle := 0
	for _, n := range t.byBlock {
		if n == nil || n.users != 0 {
			continue
		}
		idle++
		at, ok := pos[n]
		if !ok {
			return fmt.Errorf("radix: block %d has no users but is not on the ring", n.block)
		}
		if p := n.parent; p.depth > 0 && p.users == 0 && pos[p] < at {
			return fmt.Errorf("radix: block %d is on the ring after its parent, block %d", n.block, p.block)
		}
	}
	if idle != t.idle {
		return fmt.Errorf("radix: Evictable is %d, a recount finds %d nodes without users", t.idle, idle)
	}
	return nil
}

package ghost

// leafHeap holds candidate nodes, the one the policy would evict first on
// top. Each node knows its place (node.hidx, 0 when absent), so a node
// that stops being a candidate, or whose key changed, is removed or fixed
// in O(log n). A node is in at most one leafHeap at a time.
type leafHeap struct {
	c    *cache
	less func(a, b *node) bool
	// expiry makes the heap keep its places in node.xidx instead of
	// node.hidx, so that a node can be in a candidate heap and in the
	// priority policy's expiry heap at once.
	expiry bool
	items  []int32
}

// slot returns where node n keeps its place in this heap.
func (h *leafHeap) slot(n int32) *int32 {
	if h.expiry {
		return &h.c.nodes[n].xidx
	}
	return &h.c.nodes[n].hidx
}

func (h *leafHeap) len() int { return len(h.items) }

// top returns the first node, or none.
func (h *leafHeap) top() int32 {
	if len(h.items) == 0 {
		return none
	}
	return h.items[0]
}

func (h *leafHeap) lessAt(i, j int) bool {
	a, b := &h.c.nodes[h.items[i]], &h.c.nodes[h.items[j]]
	if h.less(a, b) {
		return true
	}
	if h.less(b, a) {
		return false
	}
	return h.items[i] < h.items[j] // a total order: the same top whatever the history
}

func (h *leafHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.slot(h.items[i]) = int32(i + 1)
	*h.slot(h.items[j]) = int32(j + 1)
}

func (h *leafHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.lessAt(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *leafHeap) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(h.items) {
			break
		}
		m := l
		if r := l + 1; r < len(h.items) && h.lessAt(r, l) {
			m = r
		}
		if !h.lessAt(m, i) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}

// push adds n, which is in no heap.
func (h *leafHeap) push(n int32) {
	h.items = append(h.items, n)
	*h.slot(n) = int32(len(h.items))
	h.up(len(h.items) - 1)
}

// fix restores the order after n's key changed.
func (h *leafHeap) fix(n int32) {
	if i := int(*h.slot(n)) - 1; !h.down(i) {
		h.up(i)
	}
}

// remove takes n out of the heap.
func (h *leafHeap) remove(n int32) {
	i, last := int(*h.slot(n))-1, len(h.items)-1
	if i != last {
		h.swap(i, last)
	}
	h.items = h.items[:last]
	*h.slot(n) = 0
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// has reports whether n is in this heap.
func (h *leafHeap) has(n int32) bool {
	i := int(*h.slot(n)) - 1
	return i >= 0 && i < len(h.items) && h.items[i] == n
}

// list is a doubly linked list of nodes through node.prev and node.next.
type list struct {
	c          *cache
	head, tail int32
	n          int
}

func newList(c *cache) list { return list{c: c, head: none, tail: none} }

// pushBack adds n, which is in no list, at the back.
func (l *list) pushBack(n int32) { l.insertBefore(n, none) }

// insertBefore adds n, which is in no list, right before at (none: at the back).
func (l *list) insertBefore(n, at int32) {
	nodes := l.c.nodes
	prev := l.tail
	if at != none {
		prev = nodes[at].prev
	}
	nodes[n].prev, nodes[n].next = prev, at
	if prev != none {
		nodes[prev].next = n
	} else {
		l.head = n
	}
	if at != none {
		nodes[at].prev = n
	} else {
		l.tail = n
	}
	l.n++
}

// remove takes n, which is in the list, out of it.
func (l *list) remove(n int32) {
	nodes := l.c.nodes
	prev, next := nodes[n].prev, nodes[n].next
	if prev != none {
		nodes[prev].next = next
	} else {
		l.head = next
	}
	if next != none {
		nodes[next].prev = prev
	} else {
		l.tail = prev
	}
	nodes[n].prev, nodes[n].next = none, none
	l.n--
}

// keyList is an LRU list of chain keys with O(1) membership: ARC's
// history of evicted blocks (B1, B2), which remembers keys, not nodes.
type keyList struct {
	at         map[uint64]*keyEntry
	head, tail *keyEntry // head: least recent
	spare      *keyEntry // entries removed, for the next pushBack
}

type keyEntry struct {
	key        uint64
	prev, next *keyEntry
}

func newKeyList() keyList { return keyList{at: map[uint64]*keyEntry{}} }

func (l *keyList) len() int { return len(l.at) }

func (l *keyList) has(k uint64) bool { _, ok := l.at[k]; return ok }

// pushBack adds k as the most recent; k must not be in the list.
func (l *keyList) pushBack(k uint64) {
	e := l.spare
	if e != nil {
		l.spare = e.next
		*e = keyEntry{key: k, prev: l.tail}
	} else {
		e = &keyEntry{key: k, prev: l.tail}
	}
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.at[k] = e
}

// remove takes k out, if it is in the list.
func (l *keyList) remove(k uint64) {
	e, ok := l.at[k]
	if !ok {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	delete(l.at, k)
	*e = keyEntry{next: l.spare}
	l.spare = e
}

// popFront drops the least recent key.
func (l *keyList) popFront() {
	if l.head != nil {
		l.remove(l.head.key)
	}
}

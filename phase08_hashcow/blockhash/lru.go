package blockhash

import (
	"errors"
	"fmt"
	"slices"
)

// Evictable returns how many cached blocks only the index holds: the blocks
// Evict could give back now, which the pool counts as free capacity.
func (c *Cache) Evictable() int {
	c.settle()
	return c.lru.n
}

// Evict gives up to n reclaimable blocks back to the allocator, from the
// front of the queue, and reports how many it freed.
//
// The queue holds the blocks only the index holds in the order they became
// evictable, as the cache learns it (settle): vLLM's free queue. Blocks
// that became evictable together leave deepest first, a prompt's tail
// before its head; a block Match or Insert goes through leaves the queue
// and joins again at the back when it is found evictable again. A hash
// index has no tree to keep intact: any block may go. But a block whose
// parent has gone can no longer be reached by a walk, so the order keeps
// parents longest: whoever holds a child holds its parent too, so a parent
// never becomes evictable before its child, and together the child goes
// first. A parent can still go first when a sequence pins a child it
// indexed under a parent it had computed twice (see Insert); the
// unreachable child is then simply evicted in its turn. Blocks no walk can
// reach any more (forget) go to the front.
func (c *Cache) Evict(n int) int {
	c.settle()
	freed := 0
	for ; freed < n && c.lru.n > 0; freed++ {
		b := c.lru.head
		c.lru.remove(b)
		c.drop(b)
	}
	return freed
}

// drop uncaches block b and gives the index's reference back.
func (c *Cache) drop(b int32) {
	info := &c.blocks[b]
	if refs := c.alloc.Refs(b); refs != 1 {
		panic(fmt.Sprintf("blockhash: evicting block %d with %d holders", b, refs))
	}
	// The key may belong to a newer block by now (see Insert); deleting it
	// unconditionally would lose that block's entry.
	if have, ok := c.index.get(info.key); ok && have == b {
		c.index.delete(info.key)
	}
	*info = blockInfo{}
	if len(c.salts) > 0 {
		delete(c.salts, b)
	}
	c.alloc.Decref(b)
	c.cached--
	c.evicted++
}

// settle queues every pinned block that only the index holds now.
//
// The cache sees the references it takes and gives back itself, but not the
// pool's: when a sequence frees its own pages, a forked sample finishes or a
// copy-on-write drops the original, nobody tells the cache which blocks lost
// a holder. So a block enters pinned when the cache indexes it or gives it a
// user, and is checked again here, whenever someone asks what is
// reclaimable. The other direction needs no check: a block only the index
// holds is in no page table, so only Match can give it a user.
//
// The blocks found evictable at one settle join the back of the queue
// together, in the order of their last use (the clock of the last Match or
// Insert that went through them), deepest first among blocks used at the
// same moment, and each gets a fresh clock in that order, so that the ords
// increase from the front of the queue to the back. Blocks no walk can
// reach (forget: their clock is 0) go to the front instead.
func (c *Cache) settle() {
	keep, joining := c.pinned[:0], c.joining[:0]
	for _, b := range c.pinned {
		if c.alloc.Refs(b) > 1 {
			keep = append(keep, b)
			continue
		}
		ord := c.blocks[b].ord
		if ord>>depthBits == 0 {
			c.lru.pushFront(b)
			continue
		}
		joining = append(joining, joiner{ord, b})
	}
	c.pinned = keep
	sortJoining(joining)
	for _, j := range joining {
		c.clock++
		c.blocks[j.b].ord = uint64(c.clock)<<depthBits | j.ord&depthMask
		c.lru.pushBack(j.b)
	}
	c.joining = joining[:0]
}

// joiner is a block settle queues, with its ord before it joins.
type joiner struct {
	ord uint64
	b   int32
}

// sortJoining sorts settle's blocks by ord. pinned lists the blocks of one
// Match or Insert together, head first, so that they come in runs of
// decreasing ord (one clock, deeper and deeper), and runs from later
// walks come later: reversing each run usually leaves nothing to sort, in
// one pass over the list with no comparison function to call. A
// comparison sort, O(k log k) with a call per comparison, is left for the
// lists that are still out of order.
func sortJoining(joining []joiner) {
	for i := 0; i < len(joining); {
		j := i + 1
		for j < len(joining) && joining[j].ord < joining[j-1].ord {
			j++
		}
		slices.Reverse(joining[i:j])
		i = j
	}
	cmp := func(x, y joiner) int {
		switch {
		case x.ord < y.ord:
			return -1
		case x.ord > y.ord:
			return 1
		}
		return 0
	}
	if !slices.IsSortedFunc(joining, cmp) {
		slices.SortFunc(joining, cmp)
	}
}

// pin takes b out of the queue, if it is there, into pinned: it is gaining
// a user.
func (c *Cache) pin(b int32) {
	if c.lru.has(b) {
		c.lru.remove(b)
		c.pinned = append(c.pinned, b)
	}
}

// touch marks b used now; if it was queued, it leaves the queue, to join
// it again at the back when settle finds it evictable.
func (c *Cache) touch(b int32) {
	info := &c.blocks[b]
	info.ord = pack(c.clock, info.depth())
	c.pin(b)
}

// The queue's links and a block's users share one word of its record,
// blockInfo.link: bits 0–23 hold the block before it in lru plus one,
// bits 24–47 the block after it plus one (0: none; block ids are below
// maxTableBlocks), and the top 16 bits its users, up to usersMax (beyond
// that, the rest are counted in Cache.moreUsers). Three int32 fields would
// make the record 48 bytes, not 40.
const (
	linkBits   = 24
	linkMask   = 1<<linkBits - 1
	usersShift = 2 * linkBits
	usersMax   = 1<<(64-usersShift) - 1
)

// prev returns the block before b in lru, or −1.
func (i *blockInfo) prev() int32 { return int32(i.link&linkMask) - 1 }

// next returns the block after b in lru, or −1.
func (i *blockInfo) next() int32 { return int32(i.link>>linkBits&linkMask) - 1 }

// setLinks sets the blocks before and after b in lru (−1 for none).
func (i *blockInfo) setLinks(prev, next int32) {
	i.link = i.link&^(1<<usersShift-1) | uint64(prev+1) | uint64(next+1)<<linkBits
}

func (i *blockInfo) setPrev(prev int32) { i.link = i.link&^linkMask | uint64(prev+1) }

func (i *blockInfo) setNext(next int32) {
	i.link = i.link&^(linkMask<<linkBits) | uint64(next+1)<<linkBits
}

// lru is the queue of the cached blocks only the index holds, in eviction
// order: a doubly linked list threaded through the block records
// (blockInfo.link), so that taking a block out of it anywhere, adding one
// at the back and taking the first are O(1) and touch no other memory than
// the records involved. The blocks' ords increase from front to back
// (AuditCache checks it).
type lru struct {
	head, tail int32 // −1 when empty
	n          int
	blocks     []blockInfo // the cache's
}

// has reports whether b is in the queue.
func (l *lru) has(b int32) bool { return l.blocks[b].link&linkMask != 0 || l.head == b }

// pushBack adds b, which is not queued, at the back.
func (l *lru) pushBack(b int32) {
	l.blocks[b].setLinks(l.tail, -1)
	if l.tail >= 0 {
		l.blocks[l.tail].setNext(b)
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

// pushFront adds b, which is not queued and whose clock is 0 (forget),
// after the other such blocks that sort before it, all at the front.
func (l *lru) pushFront(b int32) {
	ord := l.blocks[b].ord
	prev, next := int32(-1), l.head
	for next >= 0 && l.blocks[next].ord <= ord {
		prev, next = next, l.blocks[next].next()
	}
	l.blocks[b].setLinks(prev, next)
	if prev >= 0 {
		l.blocks[prev].setNext(b)
	} else {
		l.head = b
	}
	if next >= 0 {
		l.blocks[next].setPrev(b)
	} else {
		l.tail = b
	}
	l.n++
}

// remove takes b, which is queued, out of the queue.
func (l *lru) remove(b int32) {
	info := &l.blocks[b]
	prev, next := info.prev(), info.next()
	if prev >= 0 {
		l.blocks[prev].setNext(next)
	} else {
		l.head = next
	}
	if next >= 0 {
		l.blocks[next].setPrev(prev)
	} else {
		l.tail = prev
	}
	info.setLinks(-1, -1)
	l.n--
}

// AuditCache checks the queue's bookkeeping against a scan of every block:
// after settling, exactly the cached blocks only the index holds are in
// lru (so Evictable, its length, is right), its links agree both ways,
// and it is in order. The conformance suite calls it after every step
// (cachetest's Harness.Audit); it costs O(blocks) and changes nothing a
// caller could see.
func (c *Cache) AuditCache() error {
	c.settle()
	var errs []error
	idle := 0
	for i := range c.blocks {
		b, info := int32(i), &c.blocks[i]
		switch {
		case info.serial == 0 && c.lru.has(b):
			errs = append(errs, fmt.Errorf("blockhash: block %d is queued but not cached", b))
		case info.serial == 0:
		case c.alloc.Refs(b) == 1:
			idle++
			if !c.lru.has(b) {
				errs = append(errs, fmt.Errorf("blockhash: block %d only the index holds is not queued", b))
			}
		case c.lru.has(b):
			errs = append(errs, fmt.Errorf("blockhash: block %d has %d holders but is queued", b, c.alloc.Refs(b)))
		}
	}
	if idle != c.lru.n {
		errs = append(errs, fmt.Errorf("blockhash: Evictable is %d, a recount finds %d", c.lru.n, idle))
	}
	prev, seen := int32(-1), 0
	for b := c.lru.head; b >= 0 && seen <= c.lru.n; b = c.blocks[b].next() {
		info := &c.blocks[b]
		if info.prev() != prev {
			errs = append(errs, fmt.Errorf("blockhash: block %d in the queue after %d records %d before it", b, prev, info.prev()))
		}
		if prev >= 0 && info.ord < c.blocks[prev].ord {
			errs = append(errs, fmt.Errorf("blockhash: queue out of order at block %d", b))
		}
		prev = b
		seen++
	}
	if seen != c.lru.n || prev != c.lru.tail {
		errs = append(errs, fmt.Errorf("blockhash: the queue links %d blocks ending at %d; it counts %d ending at %d", seen, prev, c.lru.n, c.lru.tail))
	}
	return errors.Join(errs...)
}

package blockhash

import (
	"container/heap"
	"errors"
	"fmt"
)

// Evictable returns how many cached blocks only the index holds: the blocks
// Evict could give back now, which the pool counts as free capacity.
func (c *Cache) Evictable() int {
	c.settle()
	return c.lru.Len()
}

// Evict gives up to n reclaimable blocks back to the allocator, least
// recently used first, and reports how many it freed.
//
// A hash index has no tree to keep intact: any block may go. But a block
// whose parent has gone can no longer be reached by a walk, so the order
// keeps parents longest: every walk passes through a parent before its
// child, so a child is never used later than its parent, and blocks used at
// the same moment go deepest first (a prompt's tail before its head). A
// parent can still go first when a sequence pins a child it indexed under a
// parent it had computed twice (see Insert); the unreachable child is then
// simply evicted in its turn.
func (c *Cache) Evict(n int) int {
	c.settle()
	freed := 0
	for ; freed < n && c.lru.Len() > 0; freed++ {
		c.drop(c.lru.pop())
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
	*info = blockInfo{inLRU: -1}
	delete(c.salts, b)
	c.alloc.Decref(b)
	c.cached--
	c.evicted++
}

// settle moves to lru every pinned block that only the index holds now.
//
// The cache sees the references it takes and gives back itself, but not the
// pool's: when a sequence frees its own pages, a forked sample finishes or a
// copy-on-write drops the original, nobody tells the cache which blocks lost
// a holder. So a block enters pinned when the cache indexes it or gives it a
// user, and is checked again here, whenever someone asks what is
// reclaimable. The other direction needs no check: a block only the index
// holds is in no page table, so only Match can give it a user.
func (c *Cache) settle() {
	keep := c.pinned[:0]
	for _, b := range c.pinned {
		if c.alloc.Refs(b) > 1 {
			keep = append(keep, b)
			continue
		}
		c.lru.push(b)
	}
	c.pinned = keep
}

// pin moves b from lru to pinned: it is gaining a user.
func (c *Cache) pin(b int32) {
	if c.blocks[b].inLRU >= 0 {
		c.lru.remove(b)
		c.pinned = append(c.pinned, b)
	}
}

// touch marks b used now.
func (c *Cache) touch(b int32) {
	c.blocks[b].used = c.clock
	c.lru.fix(b)
}

// lru is a heap of the cached blocks only the index holds, least recently
// used first and, among blocks used at the same moment, deepest first. It
// implements heap.Interface over the cache's block table, keeping each
// block's inLRU up to date. The cache calls push, pop, remove and fix:
// heap.Push and heap.Pop would box block ids in interfaces, an allocation
// each.
type lru struct {
	ids    []int32
	blocks []blockInfo // the cache's
}

func (h *lru) Len() int { return len(h.ids) }

func (h *lru) Less(i, j int) bool {
	a, b := &h.blocks[h.ids[i]], &h.blocks[h.ids[j]]
	if a.used != b.used {
		return a.used < b.used
	}
	return a.depth > b.depth
}

func (h *lru) Swap(i, j int) {
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.blocks[h.ids[i]].inLRU = int32(i)
	h.blocks[h.ids[j]].inLRU = int32(j)
}

func (h *lru) Push(x any) {
	b := x.(int32)
	h.blocks[b].inLRU = int32(len(h.ids))
	h.ids = append(h.ids, b)
}

// Pop removes the last element and returns nil: its callers (heap.Remove,
// from pop and remove) have the id already.
func (h *lru) Pop() any {
	b := h.ids[len(h.ids)-1]
	h.blocks[b].inLRU = -1
	h.ids = h.ids[:len(h.ids)-1]
	return nil
}

func (h *lru) push(b int32) {
	h.blocks[b].inLRU = int32(len(h.ids))
	h.ids = append(h.ids, b)
	heap.Fix(h, len(h.ids)-1)
}

func (h *lru) pop() int32 {
	b := h.ids[0]
	heap.Remove(h, 0)
	return b
}

func (h *lru) remove(b int32) { heap.Remove(h, int(h.blocks[b].inLRU)) }

// fix restores the order after b's last use changed; b need not be in h.
func (h *lru) fix(b int32) {
	if i := h.blocks[b].inLRU; i >= 0 {
		heap.Fix(h, int(i))
	}
}

// AuditCache checks the LRU bookkeeping against a scan of every block:
// after settling, exactly the cached blocks only the index holds are in
// lru (so Evictable, its length, is right), each knows its place, and the
// heap is in order. The conformance suite calls it after every step
// (cachetest's Harness.Audit); it costs O(blocks) and changes nothing a
// caller could see.
func (c *Cache) AuditCache() error {
	c.settle()
	var errs []error
	idle := 0
	for i := range c.blocks {
		b, info := int32(i), &c.blocks[i]
		switch {
		case info.serial == 0 && info.inLRU >= 0:
			errs = append(errs, fmt.Errorf("blockhash: block %d is in the LRU but not cached", b))
		case info.serial == 0:
		case c.alloc.Refs(b) == 1:
			idle++
			if info.inLRU < 0 {
				errs = append(errs, fmt.Errorf("blockhash: block %d only the index holds is not in the LRU", b))
			}
		case info.inLRU >= 0:
			errs = append(errs, fmt.Errorf("blockhash: block %d has %d holders but is in the LRU", b, c.alloc.Refs(b)))
		}
	}
	if idle != c.lru.Len() {
		errs = append(errs, fmt.Errorf("blockhash: Evictable is %d, a recount finds %d", c.lru.Len(), idle))
	}
	for i, b := range c.lru.ids {
		if int(c.blocks[b].inLRU) != i {
			errs = append(errs, fmt.Errorf("blockhash: block %d at LRU position %d records %d", b, i, c.blocks[b].inLRU))
		}
		if i > 0 && c.lru.Less(i, (i-1)/2) {
			errs = append(errs, fmt.Errorf("blockhash: LRU heap out of order at %d", i))
		}
	}
	return errors.Join(errs...)
}

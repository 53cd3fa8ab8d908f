package blockhash

import (
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
	info := &c.blocks[b]
	info.ord = pack(c.clock, info.depth())
	c.lru.fix(b)
}

// lru is a heap of the cached blocks only the index holds, least recently
// used first and, among blocks used at the same moment, deepest first.
//
// Each entry carries its block's ord beside the block id, so sifting an
// entry compares integers in the heap's own array and never reads a
// block's record: at a million blocks that record is a cache miss, and a
// heap that read two of them at each of its 20 levels spent most of Evict
// waiting on memory. The heap is 4-ary, so a pop goes down half as many
// levels, and the four children of an entry are 48 bytes, one or two cache
// lines.
// Only the moved entries' positions (inLRU) are written to the records.
type lru struct {
	heap   []lruEntry
	blocks []blockInfo // the cache's
}

// lruEntry is block id's place in lru, with a copy of its blockInfo.ord
// in two halves: 12 bytes, where a uint64 field would pad it to 16.
type lruEntry struct {
	hi, lo uint32
	id     int32
}

func entry(ord uint64, id int32) lruEntry { return lruEntry{uint32(ord >> 32), uint32(ord), id} }

// ord returns the entry's copy of its block's ord.
func (e lruEntry) ord() uint64 { return uint64(e.hi)<<32 | uint64(e.lo) }

func (h *lru) Len() int { return len(h.heap) }

// push adds b, which is not in h.
func (h *lru) push(b int32) {
	h.heap = append(h.heap, lruEntry{})
	h.up(len(h.heap)-1, entry(h.blocks[b].ord, b))
}

// pop removes and returns the first block.
func (h *lru) pop() int32 {
	b := h.heap[0].id
	h.removeAt(0)
	h.blocks[b].inLRU = -1
	return b
}

// remove takes b, which is in h, out of it.
func (h *lru) remove(b int32) {
	h.removeAt(int(h.blocks[b].inLRU))
	h.blocks[b].inLRU = -1
}

// removeAt drops the entry at i, filling its place with the last entry.
func (h *lru) removeAt(i int) {
	last := len(h.heap) - 1
	e := h.heap[last]
	h.heap = h.heap[:last]
	if i == last {
		return
	}
	h.place(i, e)
}

// fix restores the order after b's ord changed; b need not be in h.
func (h *lru) fix(b int32) {
	if i := h.blocks[b].inLRU; i >= 0 {
		h.place(int(i), entry(h.blocks[b].ord, b))
	}
}

// place puts e at the hole at i, then moves it up or down to its place.
func (h *lru) place(i int, e lruEntry) {
	if i > 0 && e.ord() < h.heap[(i-1)/4].ord() {
		h.up(i, e)
	} else {
		h.down(i, e)
	}
}

// up moves e from the hole at i towards the root to its place.
func (h *lru) up(i int, e lruEntry) {
	heap, blocks := h.heap, h.blocks
	for i > 0 {
		p := (i - 1) / 4
		if heap[p].ord() <= e.ord() {
			break
		}
		heap[i] = heap[p]
		blocks[heap[i].id].inLRU = int32(i)
		i = p
	}
	heap[i] = e
	blocks[e.id].inLRU = int32(i)
}

// down moves e from the hole at i towards the leaves to its place.
func (h *lru) down(i int, e lruEntry) {
	heap, blocks := h.heap, h.blocks
	n := len(heap)
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < min(c+4, n); j++ {
			if heap[j].ord() < heap[m].ord() {
				m = j
			}
		}
		if heap[m].ord() >= e.ord() {
			break
		}
		heap[i] = heap[m]
		blocks[heap[i].id].inLRU = int32(i)
		i = m
	}
	heap[i] = e
	blocks[e.id].inLRU = int32(i)
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
	for i, e := range c.lru.heap {
		if int(c.blocks[e.id].inLRU) != i {
			errs = append(errs, fmt.Errorf("blockhash: block %d at LRU position %d records %d", e.id, i, c.blocks[e.id].inLRU))
		}
		if e.ord() != c.blocks[e.id].ord {
			errs = append(errs, fmt.Errorf("blockhash: block %d's LRU entry is stale", e.id))
		}
		if i > 0 && e.ord() < c.lru.heap[(i-1)/4].ord() {
			errs = append(errs, fmt.Errorf("blockhash: LRU heap out of order at %d", i))
		}
	}
	return errors.Join(errs...)
}

package kvcache

import (
	"fmt"

	"kvlab/kernels"
)

// Freeing what sliding-window layers no longer read.
//
// A local layer (Gemma-3's sliding-window attention) never reads a key
// again once it is before the window of every query still to come. With
// Config.LocalBlocks > 0 the pool gives such blocks back: the local layers
// keep their KV in a storage of their own (LocalBlocks blocks, with an
// allocator of their own), and every sequence has a second page table for
// them. Global layers keep the sequence's one page table and every block in
// it, as before. Slide, called as a sequence advances, returns the local
// blocks that lie wholly before the window of its next query and marks
// their entries -1; the attention kernels never read an entry before
// kernels.FirstPage, so the window guarantees nobody looks.
//
// The global and the local table always have the same length: entry i of
// both covers positions i·BlockSize … (i+1)·BlockSize−1. Grow extends both
// (all or nothing), PrepareWrite copies a shared block in both, Fork shares
// both, Release gives both back.
//
// A prefix cache cannot reuse such a sequence's blocks: it would lend the
// global blocks, but the local layers' KV of the same positions is gone.
// The engine refuses the combination (engine.Config.Validate).

// localPages is the local layers' half of the pool.
type localPages struct {
	alloc  *Allocator
	reach  int    // the widest local window
	layer  []bool // layer[l]: layer l is local
	tables map[int]*localTable
}

// localTable is one sequence's local page table.
type localTable struct {
	// pages[i] is the local block of entry i, or -1 once given back.
	pages []int32
	// from is the number of leading entries given back.
	from int
}

// newLocalPages returns the local half for layers with windows (0: global)
// over blocks local blocks of blockSize, or an error when no layer has a
// window or a sequence past its window would not fit.
func newLocalPages(windows []int, blocks, blockSize int) (*localPages, error) {
	w := &localPages{alloc: NewAllocator(blocks), layer: make([]bool, len(windows)), tables: map[int]*localTable{}}
	for l, win := range windows {
		if win < 0 {
			return nil, fmt.Errorf("kvcache: layer %d has window %d", l, win)
		}
		w.layer[l] = win > 0
		w.reach = max(w.reach, win)
	}
	if w.reach == 0 {
		return nil, fmt.Errorf("kvcache: local blocks (%d) asked for, but no layer has a sliding window: nothing would be freed", blocks)
	}
	// A decode at position p holds the entries from p−W+1 to p.
	if need := (w.reach-1)/blockSize + 2; blocks < need {
		return nil, fmt.Errorf("kvcache: %d local blocks of %d tokens cannot hold one sequence's window of %d (%d blocks)", blocks, blockSize, w.reach, need)
	}
	return w, nil
}

// WindowFree reports whether the pool gives back local layers' blocks that
// fell out of every window (Config.LocalBlocks > 0).
func (p *Pool) WindowFree() bool { return p.local != nil }

// LocalLayer reports whether layer l keeps its KV in the local layers'
// storage, addressed through LocalPages and LocalSlots.
func (p *Pool) LocalLayer(l int) bool { return p.local != nil && p.local.layer[l] }

// LocalAllocator returns the local layers' block allocator, or nil when
// the pool does not free out-of-window blocks.
func (p *Pool) LocalAllocator() *Allocator {
	if p.local == nil {
		return nil
	}
	return p.local.alloc
}

// UsedLocalBlocks returns the local blocks with a holder (0 when the pool
// does not free out-of-window blocks: the local layers then use the
// sequences' own blocks, counted by UsedBlocks).
func (p *Pool) UsedLocalBlocks() int {
	if p.local == nil {
		return 0
	}
	return p.local.alloc.Total() - p.local.alloc.NumFree()
}

// LocalPages returns sequence id's local page table (nil when the pool does
// not free out-of-window blocks): the same length as Pages, with -1 for the
// entries given back. The slice is the pool's own.
func (p *Pool) LocalPages(id int) []int32 {
	if p.local == nil {
		return nil
	}
	if t, ok := p.local.tables[id]; ok {
		return t.pages
	}
	return nil
}

// LocalSlots is Slots for the local layers: it appends the local-storage
// slot of each position in [from, from+n) of sequence id.
func (p *Pool) LocalSlots(dst []int32, id, from, n int) []int32 {
	pages := p.local.tables[id].pages
	bs := p.blockSize
	for pos := from; pos < from+n; pos++ {
		b := pages[pos/bs]
		if b < 0 {
			panic(fmt.Sprintf("kvcache: write to position %d of sequence %d, whose local block was given back", pos, id))
		}
		dst = append(dst, b*int32(bs)+int32(pos%bs))
	}
	return dst
}

// SeqBlocks returns the blocks sequence id holds: its global page table's
// length, and its local table's entries not given back (0 when the pool
// does not free out-of-window blocks).
func (p *Pool) SeqBlocks(id int) (global, local int) {
	s, ok := p.seqs[id]
	if !ok {
		return 0, 0
	}
	global = len(s.pages)
	if p.local != nil {
		t := p.local.tables[id]
		local = len(t.pages) - t.from
	}
	return global, local
}

// Slide tells the pool that no query of sequence id before position next
// will run again: every local block wholly before the window of a query at
// next goes back to the local allocator. A no-op when the pool keeps every
// block. Preemption, which recomputes from position 0, releases the
// sequence and opens it afresh.
func (p *Pool) Slide(id, next int) {
	if p.local == nil {
		return
	}
	t, ok := p.local.tables[id]
	if !ok {
		return
	}
	first := min(kernels.Visible(next, p.local.reach)/p.blockSize, len(t.pages))
	for ; t.from < first; t.from++ {
		p.local.alloc.Decref(t.pages[t.from])
		t.pages[t.from] = -1
	}
}

func (w *localPages) open(id int) { w.tables[id] = &localTable{} }

func (w *localPages) fork(parent, child int) {
	t := w.tables[parent]
	c := &localTable{pages: append([]int32(nil), t.pages...), from: t.from}
	for _, b := range c.pages[c.from:] {
		w.alloc.Incref(b)
	}
	w.tables[child] = c
}

// short returns an *OutOfBlocksError when the local allocator cannot cover
// sequence id's table up to blocks entries.
func (w *localPages) short(id, blocks int) error {
	need := blocks - len(w.tables[id].pages)
	if need > 0 && !w.alloc.CanAllocate(need) {
		return &OutOfBlocksError{Want: need, Free: w.alloc.NumFree()}
	}
	return nil
}

// grow extends sequence id's table to blocks entries; short said it can.
func (w *localPages) grow(id, blocks int) {
	t := w.tables[id]
	if need := blocks - len(t.pages); need > 0 {
		t.pages, _ = w.alloc.Allocate(t.pages, need)
	}
}

// prepareWrite copies the local blocks of entries first..last of sequence
// id that another sequence also holds (a fork), local layers only.
func (w *localPages) prepareWrite(p *Pool, id, first, last int) error {
	t := w.tables[id]
	for i := max(first, t.from); i <= last; i++ {
		old := t.pages[i]
		if w.alloc.Refs(old) == 1 {
			continue
		}
		fresh, err := w.alloc.Allocate(nil, 1)
		if err != nil {
			return err
		}
		for l, local := range w.layer {
			if local {
				p.be.CopyBlock(p.k[l], p.v[l], old, fresh[0], p.blockSize)
			}
		}
		w.alloc.Decref(old)
		t.pages[i] = fresh[0]
		p.copies++
	}
	return nil
}

func (w *localPages) release(id int) {
	t, ok := w.tables[id]
	if !ok {
		return
	}
	for _, b := range t.pages[t.from:] {
		w.alloc.Decref(b)
	}
	delete(w.tables, id)
}

// audit checks the local half as Audit checks the global one: every local
// block's count equals the table entries naming it, entries before a
// table's from are -1 and the rest are not, and the free list matches.
func (w *localPages) audit() AuditReport {
	var r AuditReport
	holders := make([]int, w.alloc.Total())
	for id, t := range w.tables {
		for i, b := range t.pages {
			switch {
			case i < t.from && b != -1:
				r.FreeListBroken = fmt.Sprintf("sequence %d's local entry %d names block %d after it was given back", id, i, b)
			case i >= t.from && b < 0:
				r.FreeListBroken = fmt.Sprintf("sequence %d's local entry %d is empty but not given back", id, i)
			case i >= t.from:
				holders[b]++
			}
		}
	}
	for b, want := range holders {
		switch have := w.alloc.Refs(int32(b)); {
		case have > want:
			r.Leaked = append(r.Leaked, int32(b))
		case have < want:
			r.Overfreed = append(r.Overfreed, int32(b))
		}
	}
	r.DoubleFreed = append(r.DoubleFreed, w.alloc.doubleFrees...)
	if msg := w.alloc.checkFreeList(); msg != "" {
		r.FreeListBroken = msg
	}
	return r
}

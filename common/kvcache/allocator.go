package kvcache

import (
	"fmt"
	"slices"
)

// Allocator hands out fixed-size KV blocks and counts who holds each one.
//
// A block is free exactly when its reference count is zero. Every holder —
// a sequence's page table, or a prefix cache — owns one reference, so a
// block shared by three sequences has a count of three and goes back to the
// free list only when the last of them lets go.
//
// Allocate and CanAllocate come in a pair on purpose: the scheduler asks
// first and commits second, so a failed allocation never leaves half a
// request's blocks taken.
type Allocator struct {
	// refs[b] is the number of holders of block b; 0 means b is free.
	refs []int32
	// free is a stack of the free block ids; len(free) == count of b with refs[b] == 0.
	free []int32
	// doubleFrees records blocks released while already free. A correct
	// engine never produces one; Audit reports them instead of hiding them.
	doubleFrees []int32
	// onDecref, when set, is told of every Decref that took a holder away
	// (the KV-event Observer's hook); nil costs one comparison.
	onDecref func(b int32, freed bool)
}

// NewAllocator returns an allocator over blocks 0..n-1, all free.
func NewAllocator(n int) *Allocator {
	a := &Allocator{refs: make([]int32, n), free: make([]int32, n)}
	// Push in reverse so the first allocations return 0, 1, 2, ...: stable
	// block ids make test failures easier to read.
	for i := range a.free {
		a.free[i] = int32(n - 1 - i)
	}
	return a
}

// Total returns the number of blocks the allocator manages.
func (a *Allocator) Total() int { return len(a.refs) }

// NumFree returns the number of blocks with no holder.
func (a *Allocator) NumFree() int { return len(a.free) }

// CanAllocate reports whether Allocate(n) would succeed.
func (a *Allocator) CanAllocate(n int) bool { return n <= len(a.free) }

// Allocate takes n free blocks, each with one reference, and appends their ids
// to dst. It takes nothing when fewer than n blocks are free.
func (a *Allocator) Allocate(dst []int32, n int) ([]int32, error) {
	if n < 0 {
		return dst, fmt.Errorf("kvcache: allocate %d blocks: negative count", n)
	}
	if !a.CanAllocate(n) {
		return dst, &OutOfBlocksError{Want: n, Free: len(a.free)}
	}
	dst = slices.Grow(dst, n)
	for range n {
		b := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		a.refs[b] = 1
		dst = append(dst, b)
	}
	return dst, nil
}

// Incref adds a holder to an allocated block. Sharing a free block is a bug
// in the caller, so it panics rather than resurrecting stale KV.
func (a *Allocator) Incref(b int32) {
	if a.refs[b] <= 0 {
		panic(fmt.Sprintf("kvcache: incref of free block %d", b))
	}
	a.refs[b]++
}

// Decref drops one holder of b and reports whether b became free. Releasing
// a block that is already free is recorded as a double free (see Audit) and
// changes nothing else.
func (a *Allocator) Decref(b int32) (freed bool) {
	if a.refs[b] <= 0 {
		a.doubleFrees = append(a.doubleFrees, b)
		return false
	}
	a.refs[b]--
	freed = a.refs[b] == 0
	if freed {
		a.free = append(a.free, b)
	}
	if a.onDecref != nil {
		a.onDecref(b, freed)
	}
	return freed
}

// DecrefAll is Decref of each block of blocks, in order, for a caller that
// gives back many references at once (a prefix cache's Release): a block
// that keeps a holder, with no hook to tell, costs no call.
func (a *Allocator) DecrefAll(blocks []int32) {
	for _, b := range blocks {
		if r := &a.refs[b]; *r > 1 && a.onDecref == nil {
			*r--
			continue
		}
		a.Decref(b)
	}
}

// Refs returns the number of holders of block b.
func (a *Allocator) Refs(b int32) int { return int(a.refs[b]) }

// OutOfBlocksError reports an allocation larger than the free list.
type OutOfBlocksError struct {
	Want, Free int
}

func (e *OutOfBlocksError) Error() string {
	return fmt.Sprintf("kvcache: out of blocks: want %d, %d free", e.Want, e.Free)
}

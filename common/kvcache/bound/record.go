package bound

import (
	"fmt"
	"io"

	"kvlab/common/kvcache"
)

// Recorder records what a pool asks its prefix cache, as a Trace the
// bound reads: a lookup at each sequence's first Match (a sequence matched
// again after a preemption finds its own KV: recompute saved, not a hit,
// as the engine counts it too) and a commit at every Insert (each chunk,
// the prompt's end, the finish, a cancel, a forked sample's), in the order
// the pool made them. The cache it wraps answers as it would unwrapped.
type Recorder struct {
	trace    *Trace
	capacity int
	achieved int
	looked   map[int]bool // sequences already looked up
}

// NewRecorder returns a recorder with nothing recorded; Wrap gives it a
// cache.
func NewRecorder() *Recorder { return &Recorder{looked: map[int]bool{}} }

// Wrap returns a factory for kvcache.Config.NewCache that builds the cache
// f builds and records every call the pool makes to it. Give the pool the
// factory it returns as the outermost one (around kvcache.ShareCapped, if
// any), so that capacity is the whole pool.
func (r *Recorder) Wrap(f func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache) func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
	return func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
		switch {
		case r.trace == nil:
			r.trace = NewTrace(blockSize)
			r.capacity = a.Total()
		case r.trace.blockSize != blockSize || r.capacity != a.Total():
			panic(fmt.Sprintf("bound: one recorder for pools of %d and %d blocks of %d and %d tokens", r.capacity, a.Total(), r.trace.blockSize, blockSize))
		}
		return &recorded{inner: f(a, blockSize), r: r}
	}
}

// Trace returns what was recorded; nil before the pool built its cache.
func (r *Recorder) Trace() *Trace { return r.trace }

// Capacity returns the pool's blocks: no cache over it can hold more.
func (r *Recorder) Capacity() int { return r.capacity }

// Achieved returns the tokens the recorded lookups found cached.
func (r *Recorder) Achieved() int { return r.achieved }

// Report compares what the cache achieved with the optimum at the pool's
// capacity and with an infinite cache.
func (r *Recorder) Report() Report {
	if r.trace == nil {
		return Report{}
	}
	return r.trace.Report(r.capacity, r.achieved)
}

type recorded struct {
	inner kvcache.PrefixCache
	r     *Recorder
}

var _ kvcache.PrefixCache = (*recorded)(nil)

func (c *recorded) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	blocks, matched := c.inner.Match(seq, salt, tokens)
	if r := c.r; !r.looked[seq] {
		r.looked[seq] = true
		r.trace.Lookup(salt, tokens)
		r.achieved += matched
	}
	return blocks, matched
}

func (c *recorded) MatchLen(salt string, tokens []int32) int { return c.inner.MatchLen(salt, tokens) }

func (c *recorded) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	c.r.trace.Commit(salt, tokens)
	return c.inner.Insert(seq, salt, tokens, pages, lent)
}

func (c *recorded) Release(seq int)           { c.inner.Release(seq) }
func (c *recorded) Evict(n int) int           { return c.inner.Evict(n) }
func (c *recorded) Evictable() int            { return c.inner.Evictable() }
func (c *recorded) Holds(b int32) int         { return c.inner.Holds(b) }
func (c *recorded) Stats() kvcache.CacheStats { return c.inner.Stats() }

// AuditCache runs the wrapped cache's own audit, if it has one, so that a
// harness that audits after every operation still does.
func (c *recorded) AuditCache() error {
	if a, ok := c.inner.(interface{ AuditCache() error }); ok {
		return a.AuditCache()
	}
	return nil
}

// Dump draws the wrapped cache, if it draws itself (kvcache.Dumper).
func (c *recorded) Dump(w io.Writer) {
	if d, ok := c.inner.(kvcache.Dumper); ok {
		d.Dump(w)
	}
}

package cachetest

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"kvlab/common/kvcache"
)

// Watch returns a Factory whose caches are the ones f builds, checked on
// every call the pool makes for two properties no design may break:
//
//   - A commit never lowers MatchLen of a prompt committed before it.
//     Insert only adds to what is cached; a design that lets a new entry
//     replace a reachable one loses hits and keeps a dead block. An Insert
//     that itself evicts is exempt: eviction may lower MatchLen.
//   - A prefix lent to a live sequence stays matchable until the sequence
//     is released: nothing can evict it, so nothing may hide it either.
//     The lent prefix is what Match found, or what the pages Insert took
//     over cover.
//
// A violation fails t. The checks call MatchLen, which has no side effects,
// on every committed prompt and every lent prefix after each call, so Watch
// is for tests and fuzzing over small pools, not benchmarks.
func Watch(t testing.TB, f Factory) Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return &watched{t: t, inner: f(a, bs), bs: bs, committed: map[string][]int32{}, lent: map[int][]int32{}}
	}
}

type watched struct {
	t     testing.TB
	inner kvcache.PrefixCache
	bs    int
	// committed holds every prompt committed so far, once each.
	committed map[string][]int32
	// lent holds, per live sequence, the prefix the cache lent it.
	lent map[int][]int32
}

var _ kvcache.PrefixCache = (*watched)(nil)

func (w *watched) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("cache invariant: "+format, args...)
}

func (w *watched) Match(seq int, tokens []int32) ([]int32, int) {
	w.t.Helper()
	blocks, matched := w.inner.Match(seq, tokens)
	if matched > 0 {
		w.lent[seq] = slices.Clone(tokens[:matched])
	}
	w.checkLent(fmt.Sprintf("Match of sequence %d", seq))
	return blocks, matched
}

func (w *watched) MatchLen(tokens []int32) int { return w.inner.MatchLen(tokens) }

func (w *watched) Insert(seq int, tokens []int32, pages []int32, lent int) int {
	w.t.Helper()
	before := make(map[string]int, len(w.committed))
	for k, p := range w.committed {
		before[k] = w.inner.MatchLen(p)
	}
	evicted := w.inner.Stats().Evicted
	newLent := w.inner.Insert(seq, tokens, pages, lent)
	if w.inner.Stats().Evicted == evicted {
		for k, p := range w.committed {
			if have := w.inner.MatchLen(p); have < before[k] {
				w.fail("commit of %d tokens by sequence %d lowered MatchLen of the earlier commit %v from %d to %d, evicting nothing",
					len(tokens), seq, p, before[k], have)
			}
		}
	}
	if covered := min(newLent*w.bs, len(tokens)); covered > len(w.lent[seq]) {
		w.lent[seq] = slices.Clone(tokens[:covered])
	}
	full := tokens[:len(tokens)/w.bs*w.bs]
	if _, ok := w.committed[keyOf(full)]; !ok && len(full) > 0 {
		w.committed[keyOf(full)] = slices.Clone(full)
	}
	w.checkLent(fmt.Sprintf("commit of %d tokens by sequence %d", len(tokens), seq))
	return newLent
}

func (w *watched) Release(seq int) {
	w.t.Helper()
	w.inner.Release(seq)
	delete(w.lent, seq)
	w.checkLent(fmt.Sprintf("release of sequence %d", seq))
}

func (w *watched) Evict(n int) int {
	w.t.Helper()
	freed := w.inner.Evict(n)
	w.checkLent(fmt.Sprintf("Evict(%d)", n))
	return freed
}

func (w *watched) Evictable() int            { return w.inner.Evictable() }
func (w *watched) Holds(b int32) int         { return w.inner.Holds(b) }
func (w *watched) Stats() kvcache.CacheStats { return w.inner.Stats() }

// checkLent fails unless every live sequence's lent prefix is matchable.
func (w *watched) checkLent(after string) {
	w.t.Helper()
	for seq, p := range w.lent {
		if have := w.inner.MatchLen(p); have < len(p) {
			w.fail("after %s: MatchLen of the %d tokens lent to live sequence %d is %d", after, len(p), seq, have)
		}
	}
}

// keyOf names a token run as a map key.
func keyOf(tokens []int32) string {
	if len(tokens) == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens)))
}

package cachetest

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"kvlab/common/kvcache"
)

// Watch returns a Factory whose caches are the ones f builds, checked on
// every call the pool makes for three properties no design may break:
//
//   - A commit never lowers MatchLen of a prompt committed before it.
//     Insert only adds to what is cached; a design that lets a new entry
//     replace a reachable one loses hits and keeps a dead block. An Insert
//     that itself evicts is exempt: eviction may lower MatchLen.
//   - A prefix lent to a live sequence stays matchable until the sequence
//     is released: nothing can evict it, so nothing may hide it either.
//     The lent prefix is what Match found, or what the pages Insert took
//     over cover. Both are per salt: a commit is matchable under the salt
//     it was committed with.
//   - Tenants never meet: Match never returns a block whose latest commit
//     was under another salt. A block changes salt only by being freed and
//     written again, and a design that hands one across salts has leaked
//     one tenant's KV, and the timing of its prompts, to another.
//
// A violation fails t. The checks call MatchLen, which has no side effects,
// on every committed prompt and every lent prefix after each call, so Watch
// is for tests and fuzzing over small pools, not benchmarks.
func Watch(t testing.TB, f Factory) Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return &watched{t: t, inner: f(a, bs), bs: bs, committed: map[string]salted{}, lent: map[int]salted{}, saltOf: map[int32]string{}}
	}
}

type watched struct {
	t     testing.TB
	inner kvcache.PrefixCache
	bs    int
	// committed holds every prompt committed so far, once each per salt.
	committed map[string]salted
	// lent holds, per live sequence, the prefix the cache lent it.
	lent map[int]salted
	// saltOf holds the salt of the latest commit that covered each block.
	saltOf map[int32]string
}

// salted is a token run and the salt it belongs to.
type salted struct {
	salt   string
	tokens []int32
}

var _ kvcache.PrefixCache = (*watched)(nil)

func (w *watched) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("cache invariant: "+format, args...)
}

func (w *watched) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	w.t.Helper()
	blocks, matched := w.inner.Match(seq, salt, tokens)
	for i, b := range blocks {
		if have, ok := w.saltOf[b]; ok && have != salt {
			w.fail("Match of sequence %d under salt %q lent block %d (position %d), committed under salt %q",
				seq, salt, b, i, have)
		}
	}
	if matched > 0 {
		w.lent[seq] = salted{salt, slices.Clone(tokens[:matched])}
	}
	w.checkLent(fmt.Sprintf("Match of sequence %d", seq))
	return blocks, matched
}

func (w *watched) MatchLen(salt string, tokens []int32) int { return w.inner.MatchLen(salt, tokens) }

func (w *watched) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	w.t.Helper()
	before := make(map[string]int, len(w.committed))
	for k, p := range w.committed {
		before[k] = w.inner.MatchLen(p.salt, p.tokens)
	}
	evicted := w.inner.Stats().Evicted
	newLent := w.inner.Insert(seq, salt, tokens, pages, lent)
	if w.inner.Stats().Evicted == evicted {
		for k, p := range w.committed {
			if have := w.inner.MatchLen(p.salt, p.tokens); have < before[k] {
				w.fail("commit of %d tokens by sequence %d lowered MatchLen of the earlier commit %v (salt %q) from %d to %d, evicting nothing",
					len(tokens), seq, p.tokens, p.salt, before[k], have)
			}
		}
	}
	if covered := min(newLent*w.bs, len(tokens)); covered > len(w.lent[seq].tokens) {
		w.lent[seq] = salted{salt, slices.Clone(tokens[:covered])}
	}
	full := tokens[:len(tokens)/w.bs*w.bs]
	for _, b := range pages[:min(len(pages), len(full)/w.bs)] {
		w.saltOf[b] = salt
	}
	if k := saltKey(salt, full); len(full) > 0 {
		if _, ok := w.committed[k]; !ok {
			w.committed[k] = salted{salt, slices.Clone(full)}
		}
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

// AuditCache runs the wrapped cache's own audit, if it has one.
func (w *watched) AuditCache() error {
	if a, ok := w.inner.(Auditor); ok {
		return a.AuditCache()
	}
	return nil
}

// checkLent fails unless every live sequence's lent prefix is matchable.
func (w *watched) checkLent(after string) {
	w.t.Helper()
	for seq, p := range w.lent {
		if have := w.inner.MatchLen(p.salt, p.tokens); have < len(p.tokens) {
			w.fail("after %s: MatchLen of the %d tokens lent to live sequence %d is %d", after, len(p.tokens), seq, have)
		}
	}
}

// saltKey names a salt and a token run as one map key: the salt's length
// comes first, so no salt's bytes can pass for another's tokens.
func saltKey(salt string, tokens []int32) string {
	return fmt.Sprintf("%d:%s", len(salt), salt) + keyOf(tokens)
}

// keyOf names a token run as a map key.
func keyOf(tokens []int32) string {
	if len(tokens) == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens)))
}

// IgnoreSalt returns a Factory whose caches are f's with every salt
// dropped: each tenant's lookups and commits go to the unsalted cache. It
// is the leak the pitfall tests show, a design that never learned of the
// salt: one tenant then finds another's prompt cached.
func IgnoreSalt(f Factory) Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return saltBlind{f(a, bs)} }
}

type saltBlind struct{ kvcache.PrefixCache }

func (s saltBlind) Match(seq int, _ string, tokens []int32) ([]int32, int) {
	return s.PrefixCache.Match(seq, "", tokens)
}

func (s saltBlind) MatchLen(_ string, tokens []int32) int { return s.PrefixCache.MatchLen("", tokens) }

func (s saltBlind) Insert(seq int, _ string, tokens, pages []int32, lent int) int {
	return s.PrefixCache.Insert(seq, "", tokens, pages, lent)
}

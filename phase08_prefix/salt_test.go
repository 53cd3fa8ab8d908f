package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// TestPitfallSaltIgnoredRadix is the PITFALLS.md entry "A prefix cache that
// ignores the tenant": a tree with one root for every tenant hands tenant b
// the blocks tenant a cached, and b's time to first token tells it what a
// sent. The tree with a root per salt finds nothing for b, and still shares
// within a salt and among unsalted requests.
func TestPitfallSaltIgnoredRadix(t *testing.T) {
	prompt := cachetest.Tokens(100, 12)
	story := func(t *testing.T, f cachetest.Factory) (h *cachetest.Harness) {
		h = cachetest.NewHarness(t, f, 32, 4)
		h.StartSalted(1, "tenant-a", prompt)
		h.Finish(1)
		h.Start(2, prompt[:8]) // an unsalted request shares a's first blocks' tokens
		h.Finish(2)
		return h
	}
	leaked, fixed := -1, -1
	t.Run("salt ignored", func(t *testing.T) {
		h := cachetest.NewHarness(t, cachetest.IgnoreSalt(radix.New), 32, 4)
		h.StartSalted(1, "tenant-a", prompt)
		h.Finish(1)
		leaked = h.Pool.MatchLen("tenant-b", prompt)
		require.Equal(t, 12, h.Pool.MatchLen("tenant-b", prompt), "b finds a's whole prompt: the leak")
		require.Equal(t, 12, h.Pool.MatchLen("", prompt), "so does every unsalted request")
	})
	t.Run("a root per salt", func(t *testing.T) {
		h := story(t, cachetest.Watch(t, radix.New))
		fixed = h.Pool.MatchLen("tenant-b", prompt)
		require.Equal(t, 0, h.Pool.MatchLen("tenant-b", prompt), "another salt finds nothing")
		require.Equal(t, 8, h.Pool.MatchLen("", prompt), "no salt finds only the unsalted commit")
		require.Equal(t, 12, h.StartSalted(3, "tenant-a", prompt), "the same salt shares")
		h.Release(3)
		// Eviction empties a salt's tree; what comes back under another
		// salt is still not shared.
		h.Cache.Evict(h.Cache.Evictable())
		require.Equal(t, 0, h.StartSalted(4, "tenant-b", prompt))
		h.Finish(4)
		require.Equal(t, 0, h.Pool.MatchLen("tenant-a", prompt))
		require.Equal(t, 0, h.Pool.MatchLen("", prompt))
	})
	t.Logf("with the bug (one root for every tenant): tenant b matches %d of tenant a's %d prompt tokens; fixed (a root per salt): %d", leaked, len(prompt), fixed)
}

package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
)

// TestPitfallSaltIgnoredTrie is the PITFALLS.md entry "One trie for every
// tenant": a trie with one root for every tenant hands tenant b the blocks
// tenant a cached. With a root per salt, an unsalted prompt that diverges
// inside a's run splits only its own trie's node, eviction trims only what
// the victim's trie holds, and b finds nothing of a's at any point.
func TestPitfallSaltIgnoredTrie(t *testing.T) {
	prompt := cachetest.Tokens(100, 16)
	story := func(t *testing.T, f cachetest.Factory) (h *cachetest.Harness) {
		h = cachetest.NewHarness(t, f, 32, 4)
		h.StartSalted(1, "tenant-a", prompt)
		h.Finish(1)
		// An unsalted prompt that leaves a's run after two blocks: a split
		// if it landed in a's node.
		h.Start(2, cachetest.Join(prompt[:8], cachetest.Tokens(900, 8)))
		h.Finish(2)
		return h
	}
	leaked, fixed := -1, -1
	t.Run("salt ignored", func(t *testing.T) {
		h := cachetest.NewHarness(t, cachetest.IgnoreSalt(trie.PrefixCache), 32, 4)
		h.StartSalted(1, "tenant-a", prompt)
		h.Finish(1)
		leaked = h.Pool.MatchLen("tenant-b", prompt)
		require.Equal(t, 16, h.Pool.MatchLen("tenant-b", prompt), "b finds a's whole prompt: the leak")
		require.Equal(t, 16, h.Pool.MatchLen("", prompt), "so does every unsalted request")
	})
	t.Run("a root per salt", func(t *testing.T) {
		h := story(t, cachetest.Watch(t, trie.PrefixCache))
		fixed = h.Pool.MatchLen("tenant-b", prompt)
		require.Equal(t, 0, h.Pool.MatchLen("tenant-b", prompt), "another salt finds nothing")
		require.Equal(t, 8, h.Pool.MatchLen("", prompt), "no salt finds only the unsalted commit")
		require.Equal(t, 16, h.Pool.MatchLen("tenant-a", prompt), "the unsalted split left a's run whole")
		require.Equal(t, 2, h.Cache.Evict(2))
		require.Equal(t, 0, h.Pool.MatchLen("tenant-b", prompt))
		want := h.Pool.MatchLen("tenant-a", prompt)
		require.Equal(t, want, h.StartSalted(3, "tenant-a", prompt), "what is left of a's run is still a's")
		h.Release(3)
	})
	t.Logf("with the bug (one root for every tenant): tenant b matches %d of tenant a's %d prompt tokens; fixed (a root per salt): %d", leaked, len(prompt), fixed)
}

package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_hashcow/blockhash"
)

// TestPitfallSaltIgnoredHash is the PITFALLS.md entry "A salted key alone
// does not keep tenants apart": an index that keys blocks without the salt
// hands tenant b the blocks tenant a cached. Mixing the salt into the first
// key keeps the chains apart only as long as keys do not collide; the check
// a hit must pass compares a first block's salt too, so even a hash that
// ignores the salt (here, one that ignores the whole parent key) cannot
// hand a salted block to an unsalted walk or to another salt's.
func TestPitfallSaltIgnoredHash(t *testing.T) {
	prompt := cachetest.Tokens(100, 12)
	leaked := -1
	fixed := map[string]int{}
	t.Run("salt ignored", func(t *testing.T) {
		h := cachetest.NewHarness(t, cachetest.IgnoreSalt(blockhash.PrefixCache), 32, 4)
		h.StartSalted(1, "tenant-a", prompt)
		h.Finish(1)
		leaked = h.Pool.MatchLen("tenant-b", prompt)
		require.Equal(t, 12, leaked, "b finds a's whole prompt: the leak")
	})
	// parentBlind keys a block by its own tokens only: every salt's first
	// key, and every chain's, collide.
	parentBlind := func(_ uint64, tokens []int32) uint64 { return blockhash.FNV1a(blockhash.Root, tokens) }
	for name, opts := range map[string][]blockhash.Option{
		"salted first key":                     nil,
		"salt in the hit check, colliding key": {blockhash.WithHash(parentBlind)},
	} {
		t.Run(name, func(t *testing.T) {
			f := func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs, opts...) }
			// No Watch: with every key colliding, a commit may take a key
			// another chain held, which costs that chain its hits
			// (PITFALLS.md, "Trusting a hash hit"); what must never happen
			// is a hit across salts, which the harness's salted KV check
			// would catch at every admission.
			h := cachetest.NewHarness(t, f, 32, 4)
			h.StartSalted(1, "tenant-a", prompt)
			h.Finish(1)
			fixed[name] = h.Pool.MatchLen("tenant-b", prompt)
			require.Equal(t, 0, h.Pool.MatchLen("tenant-b", prompt), "another salt finds nothing")
			require.Equal(t, 0, h.Pool.MatchLen("", prompt), "no salt finds nothing salted")
			require.Equal(t, 12, h.StartSalted(2, "tenant-a", prompt), "the same salt shares")
			h.Release(2)
			require.Equal(t, 0, h.StartSalted(3, "tenant-b", prompt))
			h.Finish(3)
			require.Equal(t, 12, h.StartSalted(4, "tenant-b", prompt), "b shares its own")
			h.Release(4)
			require.Equal(t, 0, h.Start(5, prompt), "no salt still finds nothing")
			h.Release(5)
		})
	}
	t.Logf("with the bug (salt ignored): tenant b matches %d of tenant a's %d prompt tokens; fixed: tenant b matches %d (salted first key) and %d (salt in the hit check, every key colliding)",
		leaked, len(prompt), fixed["salted first key"], fixed["salt in the hit check, colliding key"])
}

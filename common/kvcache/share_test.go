package kvcache_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// shareDesigns are the three designs, each behind a share cap of one half.
var shareDesigns = []struct {
	name string
	f    cachetest.Factory
}{
	{"radix", kvcache.ShareCapped(radix.New, 0.5)},
	{"blockhash", kvcache.ShareCapped(blockhash.PrefixCache, 0.5)},
	{"trie", kvcache.ShareCapped(trie.PrefixCache, 0.5)},
}

// TestShareCappedConformance runs the shared conformance suite, isolation
// included, against every design behind the cap.
func TestShareCappedConformance(t *testing.T) {
	for _, d := range shareDesigns {
		t.Run(d.name, func(t *testing.T) { cachetest.Run(t, d.f) })
	}
}

// FuzzShareCapped is the designs' fuzz target with the cap in front.
func FuzzShareCapped(f *testing.F) {
	for _, seed := range cachetest.OpsSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range shareDesigns {
			cachetest.Ops(t, d.f, data)
		}
	})
}

// TestShareCapEvictsTheFloodFirst fills a 12-block pool: tenant q caches a
// 2-block prefix first, tenant n then floods it with unique prompts. With
// one LRU order q's prefix, the oldest, goes first; with the cap n, far over
// its half, loses its own blocks instead, and live blocks are never freed.
func TestShareCapEvictsTheFloodFirst(t *testing.T) {
	const bs = 4
	quiet := cachetest.Tokens(1000, 8)
	for _, d := range shareDesigns {
		t.Run(d.name, func(t *testing.T) {
			h := cachetest.NewHarness(t, d.f, 12, bs)
			h.StartSalted(1, "q", quiet)
			h.Finish(1)
			h.StartSalted(2, "n", cachetest.Tokens(2000, 8))
			h.Commit(2) // live: its blocks must survive every eviction
			for i := range 6 {
				h.StartSalted(10+i, "n", cachetest.Tokens(3000+100*i, 8))
				h.Finish(10 + i)
				h.Audit("after a flood request")
			}
			assert.Equal(t, 8, h.Pool.MatchLen("q", quiet), "the quiet tenant's prefix survives the flood")
			assert.Equal(t, 8, h.Pool.MatchLen("n", cachetest.Tokens(2000, 8)), "a live sequence's blocks are never evicted")
			blocks, ok := kvcache.SaltBlocks(h.Cache)
			require.True(t, ok)
			assert.Equal(t, 2, blocks["q"])
			h.Release(2)
		})
	}
	// Without the cap, the same run loses the quiet prefix.
	h := cachetest.NewHarness(t, radix.New, 12, bs)
	h.StartSalted(1, "q", quiet)
	h.Finish(1)
	for i := range 6 {
		h.StartSalted(10+i, "n", cachetest.Tokens(3000+100*i, 8))
		h.Finish(10 + i)
	}
	assert.Equal(t, 0, h.Pool.MatchLen("q", quiet), "one LRU order evicts the oldest prefix, the quiet tenant's")
}

// TestShareCapEvictsOnlyWhatIsAsked: a tenant far over its share gives
// back the blocks asked for, not its whole excess at once: Evict(1) frees
// one block, from that tenant.
func TestShareCapEvictsOnlyWhatIsAsked(t *testing.T) {
	const bs = 4
	for _, d := range shareDesigns {
		t.Run(d.name, func(t *testing.T) {
			h := cachetest.NewHarness(t, d.f, 16, bs)
			h.StartSalted(1, "q", cachetest.Tokens(1000, 4))
			h.Finish(1)
			for i := range 3 {
				h.StartSalted(10+i, "n", cachetest.Tokens(2000+100*i, 12))
				h.Finish(10 + i)
			}
			before, _ := kvcache.SaltBlocks(h.Cache)
			require.Equal(t, map[string]int{"q": 1, "n": 9}, before, "n holds 9 of 10 cached blocks: 4 over its half")
			assert.Equal(t, 1, h.Cache.Evict(1), "blocks freed by Evict(1)")
			after, _ := kvcache.SaltBlocks(h.Cache)
			assert.Equal(t, map[string]int{"q": 1, "n": 8}, after, "one block, from the tenant over its share")
			h.Audit("after Evict(1)")
		})
	}
}

// TestShareCapForgetsEmptySalts: a salt whose blocks have all been evicted
// and that no sequence uses is forgotten, so salts that come and go (one
// per user, say) do not pile up; the evictions it had still count.
func TestShareCapForgetsEmptySalts(t *testing.T) {
	const bs = 4
	for _, d := range shareDesigns {
		t.Run(d.name, func(t *testing.T) {
			h := cachetest.NewHarness(t, d.f, 16, bs)
			for i, salt := range []string{"a", "b", "c"} {
				h.StartSalted(1+i, salt, cachetest.Tokens(1000*(i+1), 8))
				h.Finish(1 + i)
			}
			h.StartSalted(9, "c", cachetest.Tokens(3000, 8)) // c is in use
			assert.Equal(t, 4, h.Cache.Evict(16), "every block nobody uses")
			have, _ := kvcache.SaltBlocks(h.Cache)
			assert.Equal(t, map[string]int{"c": 2}, have, "a and b are forgotten; c, in use, stays")
			assert.Equal(t, 4, h.Cache.Stats().Evicted, "forgotten salts' evictions still count")
			h.Release(9)
			h.Audit("after the release")
		})
	}
}

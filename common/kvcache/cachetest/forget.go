package cachetest

import (
	"testing"

	"kvlab/common/kvcache"
)

// runForget checks a design's Forget (kvcache.Forgetter), for designs that
// have one: the forgotten block and everything below it stop being
// matched at once, even while live sequences read them; the blocks before
// it, its siblings and other salts' copies stay cached; live sequences
// keep their KV; what they held is reclaimable once they end; and
// ownership holds throughout.
func runForget(t *testing.T, f Factory) {
	const bs = 4
	forgetter := func(t *testing.T, h *Harness) kvcache.Forgetter {
		fg, ok := h.Cache.(kvcache.Forgetter)
		if !ok {
			t.Skip("the cache does not forget")
		}
		return fg
	}
	a := Tokens(100, 16)              // 4 blocks
	b := Join(a[:8], Tokens(300, 8))  // a sibling of a's third block
	longer := Join(a, Tokens(700, 8)) // below a's last block
	t.Run("ForgetDropsTheBlockAndBelow", func(t *testing.T) {
		h := NewHarness(t, f, 32, bs)
		forgetter(t, h)
		for id, p := range [][]int32{longer, b} {
			h.Start(id+1, p)
			h.Finish(id + 1)
		}
		h.StartSalted(3, "tenant", a)
		h.Finish(3)
		requireInt(t, "a prefix shorter than a block", h.Pool.Forget("", a[:3]), 0)
		requireInt(t, "a prefix not cached", h.Pool.Forget("", Tokens(900, 8)), 0)
		requireInt(t, "a prefix cached only under another salt", h.Pool.Forget("other", a[:12]), 0)
		requireInt(t, "MatchLen before Forget", h.Pool.MatchLen("", longer), 24)

		if n := h.Pool.Forget("", a[:12]); n != 4 {
			t.Fatalf("Forget of a's third block dropped %d blocks; want 4 (it and the three below it)", n)
		}
		h.Audit("after Forget")
		requireInt(t, "MatchLen of the forgotten prompt", h.Pool.MatchLen("", longer), 8)
		requireInt(t, "MatchLen of the sibling", h.Pool.MatchLen("", b), 16)
		requireInt(t, "MatchLen under another salt", h.Pool.MatchLen("tenant", a), 16)
		requireInt(t, "Forget again", h.Pool.Forget("", a[:12]), 0)

		requireInt(t, "cached tokens after Forget", h.Start(4, a), 8)
		h.CheckKV(4, 16)
		h.Finish(4)
		requireInt(t, "MatchLen once computed again", h.Pool.MatchLen("", a), 16)
		h.Audit("after computing the forgotten blocks again")
	})

	t.Run("ForgetLeavesLiveSequencesAlone", func(t *testing.T) {
		h := NewHarness(t, f, 32, bs)
		forgetter(t, h)
		h.Start(1, a)
		h.Commit(1)
		requireInt(t, "cached tokens of a live sharer", h.Start(2, longer), 16)
		h.Commit(2)
		requireInt(t, "blocks Forget took from readers' reach", h.Pool.Forget("", a[:8]), 5)
		h.Audit("after Forget with live sequences")
		requireInt(t, "MatchLen of the forgotten prompt while its readers live", h.Pool.MatchLen("", longer), 4)
		h.CheckKV(1, 16)
		h.CheckKV(2, 24)
		h.Release(1)
		h.Release(2)
		h.Audit("after the live sequences ended")
		requireInt(t, "MatchLen once the readers are gone", h.Pool.MatchLen("", longer), 4)
		requireInt(t, "cached tokens after Forget", h.Start(3, a), 4)
		h.CheckKV(3, 16)
		h.Release(3)
		// What Forget left to its readers is reclaimable once they are
		// gone, like any block only the cache holds.
		h.Cache.Evict(32)
		h.Audit("after evicting everything")
		requireInt(t, "blocks cached after evicting everything", h.Cache.Stats().Blocks, 0)
		requireInt(t, "free blocks after evicting everything", h.Pool.Allocator().NumFree(), 32)
	})
}

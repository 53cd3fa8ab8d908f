package cachetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
)

// RunWithoutCacheAudit is Run with the cache's own AuditCache left out. A
// cache's audit may bring lazy bookkeeping up to date before it recounts
// (the hash index settles its eviction queue, the trie re-measures pinned
// nodes); run after every operation, it would make that bookkeeping look
// settled to the operations that follow, and hide a method that forgot to
// settle it itself. The pool's ownership audit, which changes nothing,
// still runs after every operation. Not for parallel tests.
func RunWithoutCacheAudit(t *testing.T, f Factory) {
	skipCacheAudit = true
	defer func() { skipCacheAudit = false }()
	Run(t, f)
}

// skipCacheAudit makes NewHarness's harnesses skip AuditCache.
var skipCacheAudit bool

// Run runs the whole conformance suite against the caches f builds.
func Run(t *testing.T, f Factory) {
	const bs = 4
	runForget(t, f) // forget.go
	t.Run("EmptyCacheMatchesNothing", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		requireInt(t, "MatchLen on an empty cache", h.Pool.MatchLen("", Tokens(0, 10)), 0)
		requireInt(t, "cached tokens on an empty cache", h.Start(1, Tokens(0, 10)), 0)
		requireInt(t, "evictable blocks", h.Cache.Evictable(), 0)
		h.Release(1)
		requireInt(t, "cached blocks after a release without commit", h.Cache.Stats().Blocks, 0)
	})

	t.Run("ReuseAfterCommit", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		a := Tokens(100, 10)
		h.Start(1, a)
		h.Finish(1)
		requireInt(t, "MatchLen of the committed prompt", h.Pool.MatchLen("", a), 8)
		requireInt(t, "cached tokens for a longer prompt", h.Start(2, Join(a, Tokens(500, 5))), 8)
		h.Release(2)
	})

	t.Run("SharedWhileBothLive", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		a := Tokens(100, 12)
		h.Start(1, a)
		h.Commit(1)
		requireInt(t, "cached tokens while the owner is live", h.Start(2, Join(a, Tokens(7, 3))), 12)
		h.Release(1)
		h.CheckKV(2, 15)
		h.Release(2)
	})

	t.Run("DivergenceInsideABlockRoundsDown", func(t *testing.T) {
		// The prompts agree on 6 tokens; only the first whole block is
		// shared. Rounding 6 up to 8 would hand out KV of tokens the new
		// prompt does not have.
		h := NewHarness(t, f, 16, bs)
		a := Tokens(0, 12)
		h.Start(1, a)
		h.Finish(1)
		requireInt(t, "cached tokens", h.Start(2, Join(a[:6], Tokens(900, 6))), 4)
		h.Release(2)
	})

	t.Run("PartialLastBlockIsNeverShared", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		a := Tokens(0, 10)
		h.Start(1, a)
		h.Finish(1)
		requireInt(t, "cached tokens for the same 10-token prompt", h.Start(2, a), 8)
		h.Release(2)
	})

	t.Run("FullHitOnABlockAlignedPrompt", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		a := Tokens(0, 8)
		h.Start(1, a)
		h.Finish(1)
		requireInt(t, "cached tokens for the same 8-token prompt", h.Start(2, a), 8)
		h.Release(2)
	})

	t.Run("CommitOfLentBlocksTakesNoExtraReference", func(t *testing.T) {
		// A sequence that reused the whole prefix commits it again; when
		// everyone has gone, every cached block must be evictable.
		h := NewHarness(t, f, 16, bs)
		a := Tokens(0, 12)
		h.Start(1, a)
		h.Finish(1)
		h.Start(2, a)
		h.Finish(2)
		requireInt(t, "evictable blocks after all sequences finished", h.Cache.Evictable(), h.Cache.Stats().Blocks)
		requireInt(t, "cached blocks", h.Cache.Stats().Blocks, 3)
	})

	t.Run("MatchLenHasNoSideEffects", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		x, y := Tokens(0, 8), Tokens(1000, 8)
		h.Start(1, x)
		h.Finish(1)
		h.Start(2, y)
		h.Finish(2)
		ev := h.Cache.Evictable()
		for range 5 {
			requireInt(t, "MatchLen(x)", h.Pool.MatchLen("", x), 8)
		}
		requireInt(t, "evictable blocks after MatchLen", h.Cache.Evictable(), ev)
		h.Audit("after MatchLen")
		// x is the least recently used; MatchLen must not have refreshed it.
		requireInt(t, "blocks evicted", h.Cache.Evict(2), 2)
		requireInt(t, "MatchLen(y) after evicting 2 blocks", h.Pool.MatchLen("", y), 8)
		if n := h.Pool.MatchLen("", x); n >= 8 {
			t.Fatalf("MatchLen(x) after eviction: have %d; want < 8 (x was least recently used)", n)
		}
		h.Audit("after eviction")
	})

	t.Run("MatchRefreshesRecency", func(t *testing.T) {
		h := NewHarness(t, f, 16, bs)
		x, y := Tokens(0, 8), Tokens(1000, 8)
		h.Start(1, x)
		h.Finish(1)
		h.Start(2, y)
		h.Finish(2)
		h.Start(3, x) // a real match: x is now the most recently used
		h.Release(3)
		requireInt(t, "blocks evicted", h.Cache.Evict(2), 2)
		requireInt(t, "MatchLen(x) after evicting 2 blocks", h.Pool.MatchLen("", x), 8)
	})

	t.Run("LiveBlocksAreNeverEvicted", func(t *testing.T) {
		h := NewHarness(t, f, 32, bs)
		a, b := Tokens(0, 12), Tokens(500, 12)
		h.Start(1, a)
		h.Commit(1) // live
		h.Start(2, Join(a, Tokens(50, 4)))
		h.Commit(2) // live, sharing a's blocks
		h.Start(3, b)
		h.Finish(3)
		ev := h.Cache.Evictable()
		free := h.Pool.Allocator().NumFree()
		n := h.Cache.Evict(1000)
		h.Audit("after evicting everything evictable")
		requireInt(t, "blocks Evict reported", n, ev)
		requireInt(t, "free blocks gained", h.Pool.Allocator().NumFree()-free, n)
		requireInt(t, "evictable blocks left", h.Cache.Evictable(), 0)
		h.CheckKV(1, 12)
		h.CheckKV(2, 16)
		requireInt(t, "MatchLen of the live prompt", h.Pool.MatchLen("", a), 12)
		h.Release(1)
		h.Release(2)
	})

	t.Run("FreeCapacityCountsEvictableBlocks", func(t *testing.T) {
		// Eight blocks, four of them held by the cache alone: a prompt that
		// needs all eight must still be admitted, by evicting.
		h := NewHarness(t, f, 8, bs)
		h.Start(1, Tokens(0, 16))
		h.Finish(1)
		requireInt(t, "free tokens", h.Pool.FreeTokens(), 8*bs)
		requireInt(t, "cached tokens for an unrelated 32-token prompt", h.Start(2, Tokens(1000, 32)), 0)
		if h.Cache.Stats().Evicted < 4 {
			t.Fatalf("evicted blocks: have %d; want ≥ 4", h.Cache.Stats().Evicted)
		}
		h.Release(2)
	})

	t.Run("CommitAtFinishCoversOutput", func(t *testing.T) {
		// A second commit with the generated tokens appended must keep the
		// prompt's blocks and may add the output's.
		h := NewHarness(t, f, 32, bs)
		prompt := Tokens(0, 10)
		h.Start(1, prompt)
		h.Commit(1)
		if !h.Extend(1, Tokens(300, 9)) {
			t.Fatal("extend failed with a roomy pool")
		}
		h.Finish(1)
		next := Join(prompt, Tokens(300, 9), Tokens(40, 5))
		got := h.Start(2, next)
		if got < 8 || got > 16 {
			t.Fatalf("cached tokens for the next turn: have %d; want between 8 (prompt) and 16 (prompt + output)", got)
		}
		h.Release(2)
	})

	t.Run("DrainReturnsEveryBlock", func(t *testing.T) {
		h := NewHarness(t, f, 64, bs)
		for i := range 6 {
			h.Start(i, Join(Tokens(0, 8), Tokens(100*i, 6)))
			h.Finish(i)
		}
		h.Cache.Evict(h.Cache.Evictable())
		h.Audit("after draining")
		requireInt(t, "free blocks after draining", h.Pool.Allocator().NumFree(), 64)
		requireInt(t, "cached blocks after draining", h.Cache.Stats().Blocks, 0)
	})

	t.Run("CommitAfterAnEvictedCopyKeepsEveryHit", func(t *testing.T) {
		// Block size 2. A and B both compute [1 3]: B commits it first, and
		// A's commit hangs [3 1] under B's copy. B finishes and its copy of
		// [1 3] may be evicted; C then caches the whole prompt. A's last
		// commit must leave C's prompt matchable in full: a design that
		// continues A's chain from its own [3 1], orphaned by the eviction,
		// would replace C's reachable [1 2] with an unreachable one.
		h := NewHarness(t, Watch(t, f), 16, 2)
		prompt := []int32{1, 3, 3, 1, 1, 2}
		requireInt(t, "cached tokens for A", h.Admit(1, prompt), 0)
		requireInt(t, "cached tokens for B", h.Admit(2, prompt[:2]), 0)
		h.Prefill(2, 2)
		h.CommitPrefix(2, 2)
		h.Prefill(1, 5)
		h.CommitPrefix(1, 5)
		h.Finish(2)
		h.Cache.Evict(1)
		h.Start(3, prompt)
		h.Commit(3)
		requireInt(t, "MatchLen once C committed", h.Pool.MatchLen("", prompt), 6)
		h.Prefill(1, 6)
		h.CommitPrefix(1, 6)
		requireInt(t, "MatchLen once A committed", h.Pool.MatchLen("", prompt), 6)
		h.Release(3)
		h.Release(1)
		h.Cache.Evict(h.Cache.Evictable())
		requireInt(t, "free blocks after draining", h.Pool.Allocator().NumFree(), 16)
	})

	t.Run("SaltsNeverShare", func(t *testing.T) {
		// Same salt shares; different salts never share a block; no salt
		// shares only with no salt. A lent block under the wrong salt also
		// fails CheckKV: the harness's KV depends on the salt.
		h := NewHarness(t, Watch(t, f), 32, bs)
		a := Tokens(100, 12)
		h.Start(1, a)
		h.Finish(1) // unsalted
		requireInt(t, "cached tokens under salt x for an unsalted commit", h.StartSalted(2, "x", a), 0)
		h.Finish(2) // now cached under x too
		requireInt(t, "cached tokens under salt y", h.StartSalted(3, "y", a), 0)
		h.Release(3)
		requireInt(t, "MatchLen under x", h.Pool.MatchLen("x", a), 12)
		requireInt(t, "MatchLen under y", h.Pool.MatchLen("y", a), 0)
		requireInt(t, "MatchLen unsalted", h.Pool.MatchLen("", a), 12)
		requireInt(t, "cached tokens under x, same salt", h.StartSalted(4, "x", Join(a, Tokens(7, 2))), 12)
		requireInt(t, "cached tokens unsalted", h.Start(5, a), 12)
		h.Release(4)
		h.Release(5)
		// A salt that is a prefix of another, or looks like tokens, is
		// still another salt.
		requireInt(t, "MatchLen under a longer salt", h.Pool.MatchLen("xx", a), 0)
		h.Cache.Evict(h.Cache.Evictable())
		requireInt(t, "free blocks after draining", h.Pool.Allocator().NumFree(), 32)
	})

	t.Run("SaltsStayApartThroughSplitsAndEvictions", func(t *testing.T) {
		// Tenants commit prompts that share and diverge at every block
		// boundary, interleaved, so that designs split, merge and evict
		// around each other; after each step no lookup may cross salts.
		h := NewHarness(t, Watch(t, f), 20, bs)
		base := Tokens(0, 16)
		salts := []string{"", "p", "q"}
		id := 0
		for round := range 6 {
			for i, salt := range salts {
				cut := 4 * ((round + i) % 4)
				prompt := Join(base[:cut], Tokens(1000*(round+1)+i, 4+4*(round%2)))
				want := 0
				if round > 0 {
					want = -1 // something may be cached; how much depends on eviction
				}
				got := h.StartSalted(id, salt, prompt)
				if want == 0 && got != 0 {
					t.Fatalf("round 0, salt %q: cached %d tokens of a prompt no one with that salt committed", salt, got)
				}
				if got >= 0 {
					h.Finish(id)
				}
				id++
				h.Cache.Evict(round % 3)
				h.Audit("after evicting")
			}
		}
		for _, salt := range []string{"r", "pq", "P"} {
			requireInt(t, "MatchLen of the shared base under an unused salt "+salt, h.Pool.MatchLen(salt, base), 0)
		}
	})

	t.Run("ForkKeepsItsSalt", func(t *testing.T) {
		// A forked sample holds its parent's blocks and writes its own
		// copies of the shared last block: both are the parent's tenant's.
		h := NewHarness(t, Watch(t, f), 32, bs)
		prompt := Tokens(100, 10)
		h.StartSalted(1, "x", prompt)
		h.Commit(1)
		h.Fork(1, 2)
		if !h.Extend(2, Tokens(500, 6)) {
			t.Fatal("extend failed with a roomy pool")
		}
		h.Finish(2)
		h.Finish(1)
		child := Join(prompt, Tokens(500, 6))
		requireInt(t, "MatchLen of the fork's tokens unsalted", h.Pool.MatchLen("", child), 0)
		requireInt(t, "MatchLen of the fork's tokens under another salt", h.Pool.MatchLen("y", child), 0)
		if got := h.StartSalted(3, "x", child); got < 8 {
			t.Fatalf("cached tokens of the fork's tokens under its own salt: have %d; want ≥ 8", got)
		}
		h.Release(3)
	})

	t.Run("EngineLikeOperations", func(t *testing.T) {
		for i, data := range OpsSeeds() {
			t.Run(fmt.Sprint(i), func(t *testing.T) { Ops(t, f, data) })
		}
	})

	for _, pressure := range []bool{false, true} {
		name := "RandomOperationsAgainstReference"
		if pressure {
			name += "UnderPressure"
		}
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(8) {
				t.Run(fmt.Sprint(seed), func(t *testing.T) { randomOps(t, f, seed, pressure, false) })
			}
		})
	}
	t.Run("RandomOperationsWithTiers", func(t *testing.T) {
		var demoted, promoted, passed int
		for seed := range uint64(8) {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				c, down := randomOps(t, f, seed, true, true)
				demoted, promoted, passed = demoted+c.Demoted, promoted+c.Promoted[0], passed+down
			})
		}
		if demoted == 0 || promoted == 0 || passed == 0 {
			t.Fatalf("the tiers were not exercised: %d blocks demoted, %d promoted, %d passed down", demoted, promoted, passed)
		}
	})
}

// randomOps runs random starts, extensions, commits and releases over
// prompts drawn from a few shared prefixes. Without memory pressure nothing
// is evicted, so every start must find exactly the longest block-aligned
// prefix any committed sequence had; under pressure it may find less, never
// more, and never wrong KV.
//
// With tiers, two host-memory tiers of a few blocks each sit under the
// cache, the first passing what it evicts to the second, and the cache is
// also made to evict at random: blocks go down and come back up at random,
// and every start checks the KV of what it found, promoted blocks
// included; the audit after every operation recounts the tiers too.
//
// It returns what the pool did with the tiers, and how many blocks the
// first tier passed down to the second.
func randomOps(t *testing.T, f Factory, seed uint64, pressure, tiers bool) (kvcache.TierCounters, int) {
	const bs = 4
	blocks := 4096 // never full: nothing is evicted
	if pressure {
		blocks = 24
	}
	h := NewHarness(t, Watch(t, f), blocks, bs)
	var below *kvcache.RAMTier
	if tiers {
		size := kvcache.TierBlock{Tokens: make([]int32, bs), KV: make([]byte, h.Pool.BlockBytes())}.Size()
		below = kvcache.NewRAMTier(6*size, nil)
		if err := h.Pool.AttachTiers(kvcache.NewRAMTier(4*size, below)); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 77))
	bases := [][]int32{Tokens(0, 20), Tokens(5000, 9), Tokens(9000, 3)}
	var committed [][]int32
	live := map[int]bool{}
	next := 0
	for range 300 {
		switch op := rng.IntN(10); {
		case op < 4: // start a new sequence
			base := bases[rng.IntN(len(bases))]
			prompt := Join(base[:rng.IntN(len(base)+1)], Tokens(20000+rng.IntN(5)*7, rng.IntN(9)))
			if len(prompt) == 0 {
				continue
			}
			want := 0
			for _, c := range committed {
				want = max(want, floorBlocks(commonPrefix(c, prompt), bs))
			}
			got := h.Start(next, prompt)
			if got < 0 {
				continue // the pool is full of live sequences
			}
			if got > want || (!pressure && got != want) {
				t.Fatalf("start %d (%d tokens): cached %d; want %s%d", next, len(prompt), got, map[bool]string{true: "at most ", false: ""}[pressure], want)
			}
			live[next] = true
			next++
		case op < 6: // decode a few tokens into a live sequence
			if id, ok := pick(rng, live); ok {
				h.Extend(id, Tokens(30000+rng.IntN(3), 1+rng.IntN(5)))
			}
		case op < 8: // commit a live sequence
			if id, ok := pick(rng, live); ok {
				committed = append(committed, append([]int32(nil), h.prompts[id]...))
				h.Commit(id)
			}
			if tiers && rng.IntN(3) == 0 { // and push some of the cache down
				h.Cache.Evict(1 + rng.IntN(4))
				h.Audit("after a forced eviction")
			}
		default: // finish a live sequence
			if id, ok := pick(rng, live); ok {
				h.Release(id)
				delete(live, id)
			}
		}
	}
	for id := range live {
		h.Release(id)
	}
	h.Cache.Evict(h.Cache.Evictable())
	h.Audit("after draining")
	requireInt(t, "free blocks after draining", h.Pool.Allocator().NumFree(), blocks)
	if !tiers {
		return kvcache.TierCounters{}, 0
	}
	return h.Pool.TierCounters(), below.Stats().Puts
}

func pick(rng *rand.Rand, live map[int]bool) (int, bool) {
	if len(live) == 0 {
		return 0, false
	}
	n := rng.IntN(len(live))
	for id := range live {
		if n == 0 {
			return id, true
		}
		n--
	}
	return 0, false
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func requireInt(t testing.TB, what string, have, want int) {
	t.Helper()
	if have != want {
		t.Fatalf("%s: have %d; want %d", what, have, want)
	}
}

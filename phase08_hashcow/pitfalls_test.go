package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/model"
	"kvlab/kernels"
	"kvlab/phase08_hashcow/blockhash"
)

// Each test here reproduces one entry of PITFALLS.md: the buggy variant
// shows the symptom, the code of this package does not.

// sequential serves reqs one after the other (each finishes before the next
// arrives), so every request can find all earlier ones in the cache.
func sequential(t *testing.T, m *model.Model, f func(*kvcache.Allocator, int) kvcache.PrefixCache, reqs []engine.Request) (map[int]*engine.Result, engine.Stats) {
	t.Helper()
	res, e := serve(t, m, cached(testConfig(), f), reqs, 40)
	return res, e.Stats()
}

func greedy(id int, prompt []int32) engine.Request {
	return engine.Request{ID: id, Prompt: prompt, MaxTokens: 5, IgnoreEOS: true, KeepLogits: true}
}

// symptom is what one side of a pitfall test measured against the run
// without a cache: the tokens served from the cache, how many requests
// generated other tokens, and the largest logit difference.
type symptom struct {
	cached, wrong, of int
	gap               float64
}

func measure(have, want map[int]*engine.Result, st engine.Stats) symptom {
	gap, wrong := cachetest.LogitGap(have, want)
	return symptom{cached: st.CachedTokens, wrong: wrong, of: len(want), gap: gap}
}

func (s symptom) String() string {
	return fmt.Sprintf("%d prompt tokens reused, %d of %d requests generated other tokens, logits differ by up to %.3g",
		s.cached, s.wrong, s.of, s.gap)
}

// sampleGap compares forked samples with their solo runs: how many of them
// generated other tokens, and the largest logit difference.
func sampleGap(have, want [][]int32, haveLogits, wantLogits [][][]float32) (wrong int, gap float64) {
	for i := range want {
		if i >= len(have) || !slices.Equal(have[i], want[i]) {
			wrong++
		}
		if i < len(haveLogits) && i < len(wantLogits) {
			g, _ := cachetest.LogitGap(map[int]*engine.Result{0: {Logits: haveLogits[i]}}, map[int]*engine.Result{0: {Logits: wantLogits[i]}})
			gap = max(gap, g)
		}
	}
	return wrong, gap
}

func TestPitfallUnchainedHashSharesAnotherPrefixsKV(t *testing.T) {
	m := loadModel(t)
	s, x, same := tokens(100, 4), tokens(200, 4), tokens(300, 4)
	reqs := []engine.Request{
		greedy(0, join(s, x, same, tokens(400, 3))),
		greedy(1, join(s, same, tokens(500, 3))), // same block, other prefix
	}
	want := baseline(t, m, testConfig(), reqs)
	var bug, fix symptom

	t.Run("key of the block alone", func(t *testing.T) {
		// Even comparing the block's tokens cannot help: they are equal.
		have, stats := sequential(t, m, newTrustingIndex(unchained, true), reqs)
		bug = measure(have, want, stats)
		require.Equal(t, 8, stats.CachedTokens, "request 1 reuses s, then request 0's KV of `same` after [s x]")
		require.NotEmpty(t, diff(have, want), "wrong KV must change the output")
	})
	t.Run("chained key", func(t *testing.T) {
		have, stats := sequential(t, m, blockhash.PrefixCache, reqs)
		fix = measure(have, want, stats)
		require.Equal(t, 4, stats.CachedTokens, "only s is shared")
		requireSame(t, have, want)
	})
	// The production index also compares each entry's parent, so the run
	// above would pass even with unchained keys; the keys themselves must
	// chain, or `same` after [s x] and `same` after [s] share one slot and
	// evict each other's entries. Every hash the index offers must mix the
	// parent in.
	hashes := map[string]blockhash.HashFunc{"WordHash": blockhash.WordHash, "MapHash": blockhash.MapHash, "XXHash": blockhash.XXHash, "FNV1a": blockhash.FNV1a}
	// What a shared key costs the production index: `same` after [s] and
	// `same` after [s x] want one slot, so request 1's commit displaces
	// request 0's entry, and request 0's prompt, sent again, finds only
	// [s x] (8 tokens) where chained keys keep all 12.
	again := greedy(2, reqs[0].Prompt)
	var refound int
	t.Run("a shared key costs a hit", func(t *testing.T) {
		res, e := serve(t, m, cached(testConfig(), blockhash.PrefixCache), append(slices.Clone(reqs), again), 40)
		refound = e.Stats().CachedTokens - 4 // request 1 found s
		require.Equal(t, 12, refound, "request 0's prompt, sent again after request 1, is found whole")
		requireSame(t, map[int]*engine.Result{0: res[0], 1: res[1]}, want)
	})
	var apart []string
	t.Run("production keys chain the parent", func(t *testing.T) {
		for _, name := range slices.Sorted(maps.Keys(hashes)) {
			h := hashes[name]
			afterSX := h(h(h(blockhash.Root, s), x), same)
			afterS := h(h(blockhash.Root, s), same)
			apart = append(apart, fmt.Sprintf("%s %v", name, afterSX != afterS))
			require.NotEqual(t, afterSX, afterS, "%s: the key of a block must depend on its prefix", name)
		}
	})
	t.Logf("with the bug (key of the block alone): %s; fixed (chained key): %s; request 0's prompt sent again after request 1 finds %d of its 12 cacheable tokens; the production hashes key the block same apart after [s x] and after [s]: %s",
		bug, fix, refound, strings.Join(apart, ", "))
}

// collide returns the first 4-token block b, scanning from token 1000, for
// which ok(b) holds.
func collide(t *testing.T, ok func(b []int32) bool) []int32 {
	t.Helper()
	for base := 1000; base < 1000+4096; base++ {
		if b := tokens(base, 4); ok(b) {
			return b
		}
	}
	t.Fatal("no colliding block found")
	return nil
}

func TestPitfallHashHitWithoutTokenCheck(t *testing.T) {
	m := loadModel(t)
	a := tokens(100, 4)
	b := collide(t, func(b []int32) bool { return weak(blockhash.Root, b) == weak(blockhash.Root, a) })
	reqs := []engine.Request{greedy(0, join(a, tokens(300, 6))), greedy(1, join(b, tokens(300, 6)))}
	want := baseline(t, m, testConfig(), reqs)
	var bug, fix symptom

	t.Run("trusting the hash", func(t *testing.T) {
		have, stats := sequential(t, m, newTrustingIndex(weak, false), reqs)
		bug = measure(have, want, stats)
		// Its first block collides with request 0's, and once two chains
		// share a key, the equal blocks after them do too.
		require.Equal(t, 8, stats.CachedTokens, "request 1 reuses request 0's KV for both its blocks")
		require.NotEmpty(t, diff(have, want), "wrong KV must change the output")
	})
	t.Run("verifying the tokens", func(t *testing.T) {
		have, stats := sequential(t, m, weakCache, reqs)
		fix = measure(have, want, stats)
		require.Equal(t, 0, stats.CachedTokens)
		requireSame(t, have, want)
	})
	t.Logf("with the bug (a 4-bit key hit trusted): %s; fixed (tokens compared on every hit): %s", bug, fix)
}

func weakCache(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
	return blockhash.New(a, bs, blockhash.WithHash(weak))
}

func TestPitfallTokenCheckMissesAParentCollision(t *testing.T) {
	m := loadModel(t)
	a, x := tokens(100, 4), tokens(200, 4)
	ka := weak(blockhash.Root, a)
	kax := weak(ka, x)
	require.NotEqual(t, ka, kax, "pick blocks whose own keys differ")
	// same's key after [a] equals its key after [a x]: a collision of the
	// chain, not of the block, so its tokens match.
	same := collide(t, func(b []int32) bool {
		k := weak(kax, b)
		return weak(ka, b) == k && k != ka && k != kax
	})
	reqs := []engine.Request{greedy(0, join(a, x, same, tokens(400, 3))), greedy(1, join(a, same, tokens(500, 3)))}
	want := baseline(t, m, testConfig(), reqs)
	var bug, fix symptom

	t.Run("checking the block's tokens only", func(t *testing.T) {
		have, stats := sequential(t, m, newTrustingIndex(weak, true), reqs)
		bug = measure(have, want, stats)
		require.Equal(t, 8, stats.CachedTokens, "request 1 reuses a, then request 0's KV of `same` after [a x]")
		require.NotEmpty(t, diff(have, want), "wrong KV must change the output")
	})
	t.Run("checking the parent too", func(t *testing.T) {
		have, stats := sequential(t, m, weakCache, reqs)
		fix = measure(have, want, stats)
		require.Equal(t, 4, stats.CachedTokens, "only a is shared")
		requireSame(t, have, want)
	})
	t.Logf("with the bug (block's tokens checked, parent not): %s; fixed (parent checked too): %s", bug, fix)
}

func TestPitfallWriteIntoASharedBlock(t *testing.T) {
	m := loadModel(t)
	prompt := tokens(40, 10) // the last block holds 2 tokens; 4 samples share it
	s := engine.Sampling{Temperature: 1.3, Seed: 50}
	want, wantLogits := solo(t, engine.Request{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: s}, 4)
	require.NotEqual(t, want[0][0], want[3][0], "the samples must diverge at their first token")
	var bugWrong, fixWrong, fixCopies int
	var bugGap, fixGap float64

	t.Run("written in place", func(t *testing.T) {
		d := newForkDriver(t, m, 64, 4, blockhash.PrefixCache)
		d.noCopy = true
		have, logits, err := d.run(prompt, 4, 6, s)
		bugWrong, bugGap = sampleGap(have, want, logits, wantLogits)
		require.NoError(t, err, "ownership stays consistent: only the KV is wrong")
		require.NotEqual(t, want, have, "every sample reads the last writer's KV at position 10")
		require.Zero(t, d.pool.Copies())
	})
	t.Run("copied first", func(t *testing.T) {
		d := newForkDriver(t, m, 64, 4, blockhash.PrefixCache)
		have, logits, err := d.run(prompt, 4, 6, s)
		fixWrong, fixGap = sampleGap(have, want, logits, wantLogits)
		fixCopies = d.pool.Copies()
		require.NoError(t, err)
		require.Equal(t, want, have)
		require.Equal(t, 3, d.pool.Copies(), "one copy per sample but the last writer")
	})
	t.Logf("with the bug (4 samples write position 10 into their one shared block): %d of 4 samples differ from their solo runs, logits by up to %.3g; fixed (copy before the first write): %d copies, %d samples differ, gap %.3g",
		bugWrong, bugGap, fixCopies, fixWrong, fixGap)
}

// keyTable is the part of an index the PITFALLS.md entry "Deleting a stale
// key unconditionally" is about, ported alone: keys name blocks, a newer
// block takes a contested key, and evicting a block removes its key —
// unconditionally in the buggy version.
type keyTable struct {
	byKey       map[uint64]int32
	keyOf       map[int32]uint64
	conditional bool
}

func (k *keyTable) add(key uint64, b int32) { k.byKey[key], k.keyOf[b] = b, key }

func (k *keyTable) evict(b int32) {
	key := k.keyOf[b]
	delete(k.keyOf, b)
	if !k.conditional || k.byKey[key] == b {
		delete(k.byKey, key)
	}
}

func TestPitfallStaleKeyDeletesTheNewOwner(t *testing.T) {
	found := map[bool]string{}
	for _, tc := range []struct {
		name        string
		conditional bool
		wantHit     bool
	}{
		{"deleted unconditionally", false, false},
		{"deleted only if still its own", true, true},
	} {
		t.Run("port/"+tc.name, func(t *testing.T) {
			k := &keyTable{byKey: map[uint64]int32{}, keyOf: map[int32]uint64{}, conditional: tc.conditional}
			k.add(42, 5) // block 5 cached under key 42
			k.add(42, 9) // block 9 takes the key; 5 is stale
			k.evict(5)   // 5 is reclaimed, to be reused
			b, hit := k.byKey[42]
			found[tc.conditional] = fmt.Sprintf("found=%v", hit)
			if hit {
				found[tc.conditional] += fmt.Sprintf(" (block %d)", b)
			}
			if hit != tc.wantHit || (hit && b != 9) {
				t.Fatalf("lookup of key 42 after evicting block 5: have %d, %v; want block 9: %v", b, hit, tc.wantHit)
			}
		})
	}
	t.Run("blockhash", func(t *testing.T) {
		// Two one-block prompts whose keys collide: the second takes the
		// key, the first stays cached but unreachable, is reclaimed first,
		// and its block is reused. The second must still be found.
		h := cachetest.NewHarness(t, weakCache, 6, 4)
		a := tokens(100, 4)
		b := collide(t, func(b []int32) bool { return weak(blockhash.Root, b) == weak(blockhash.Root, a) })
		h.Start(1, a)
		h.Finish(1)
		h.Start(2, b)
		h.Finish(2)
		stale := h.Pool.Allocator().Total() - h.Pool.Allocator().NumFree()
		require.Equal(t, 2, stale, "both blocks cached")
		evicted := h.Cache.Evict(1)
		matchB, matchA := h.Pool.MatchLen("", b), h.Pool.MatchLen("", a)
		t.Logf("with the bug (key deleted unconditionally): evicting stale block 5 leaves key 42 %s, so the new owner, block 9, is lost; fixed (deleted only if still its own): %s; blockhash, after evicting %d block, the stale one: the new owner's prompt matches %d of 4 tokens, the stale one's %d",
			found[false], found[true], evicted, matchB, matchA)
		require.Equal(t, 1, evicted)
		require.Equal(t, 4, matchB, "evicting the stale block kept the new owner's key")
		require.Equal(t, 0, matchA)
		h.Start(3, tokens(700, 4)) // reuses the freed block
		h.Release(3)
		require.Equal(t, 4, h.Pool.MatchLen("", b), "once the freed block is reused")
	})
}

func TestPitfallFullPrefixHit(t *testing.T) {
	m := loadModel(t)
	prompt := tokens(60, 16) // four whole blocks: the second request finds all of it
	reqs := []engine.Request{greedy(0, prompt), greedy(1, prompt)}

	var bugCached int
	var bugPanic, bugWrite string
	t.Run("nothing left to compute", func(t *testing.T) {
		d := newForkDriver(t, m, 16, 4, blockhash.PrefixCache)
		_, _, err := d.run(prompt, 1, 2, engine.Sampling{})
		require.NoError(t, err)
		cached, err := d.pool.Open(1, "", prompt)
		require.NoError(t, err)
		require.Equal(t, 16, cached)
		// Starting the prefill at the first uncached token leaves no row
		// at all, so no logits for the first output token.
		st := &model.Step{Tokens: prompt[cached:], Seqs: []kernels.AttnSeq{{QLen: 0, CtxLen: 16, Pages: d.pool.Pages(1)}}}
		bugCached = cached
		func() {
			defer func() { bugPanic = fmt.Sprint(recover()) }()
			m.Forward(st, d.pool)
		}()
		require.Equal(t, "model: Forward on an empty step", bugPanic)
		// Recomputing the last token and writing its KV would write into a
		// block the cache lent (and other sequences read).
		err = d.pool.PrepareWrite(1, 15, 1)
		bugWrite = fmt.Sprint(err)
		require.ErrorContains(t, err, "lent by the prefix cache")
		d.pool.Release(1)
	})
	var fix symptom
	t.Run("last token recomputed, not written", func(t *testing.T) {
		want := baseline(t, m, testConfig(), reqs)
		have, stats := sequential(t, m, blockhash.PrefixCache, reqs)
		fix = measure(have, want, stats)
		require.Equal(t, 16, stats.CachedTokens)
		requireSame(t, have, want)
	})
	t.Logf("with the bug: %d of 16 prompt tokens cached leaves a step of 0 rows (%q), and recomputing the last token into the lent block fails (%q); fixed (last token recomputed, KV not written): %s",
		bugCached, bugPanic, bugWrite, fix)
}

func TestPitfallCopyOnWriteNeedsAFreeBlock(t *testing.T) {
	m := loadModel(t)
	prompt := tokens(40, 10) // 3 blocks of 4, the last shared by 3 samples
	s := engine.Sampling{Temperature: 1.3, Seed: 7}
	want, _ := solo(t, engine.Request{ID: 1, Prompt: prompt, MaxTokens: 2, IgnoreEOS: true, Sampling: s}, 3)
	var bugErr string
	var fixWrong, fixCopies int

	t.Run("found short at write time", func(t *testing.T) {
		d := newForkDriver(t, m, 4, 4, blockhash.PrefixCache) // one spare block: one copy
		_, _, err := d.run(prompt, 3, 2, s)
		bugErr = fmt.Sprint(err)
		require.Error(t, err)
		require.True(t, isOutOfBlocks(err), "have %v; want the pool out of blocks", err)
	})
	t.Run("counted when scheduling", func(t *testing.T) {
		d := newForkDriver(t, m, 4, 4, blockhash.PrefixCache)
		d.waitForCopies = true
		have, _, err := d.run(prompt, 3, 2, s)
		fixWrong, _ = sampleGap(have, want, nil, nil)
		fixCopies = d.pool.Copies()
		require.NoError(t, err)
		require.Equal(t, want, have)
	})
	t.Logf("with the bug (3 samples, 1 spare block, copies found short at write time): %s; fixed (copies counted when scheduling): %d copies, %d of 3 samples differ from their solo runs",
		bugErr, fixCopies, fixWrong)
}

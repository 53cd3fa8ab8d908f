package main

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/phase08_hashcow/blockhash"
)

func randomTokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(512))
	}
	return out
}

// TestCacheMatchesBaseline is the cache's contract with the engine: every
// request generates exactly the tokens, and sample 0 exactly the logits, of
// the phase-7 engine without a cache, while the cache reuses what the block
// math says it can. Block ownership is audited after every step.
func TestCacheMatchesBaseline(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(1, 2))
	system := randomTokens(rng, 37) // 9 whole blocks of 4, and one token
	shared := func(n int, s engine.Sampling, samples int) []engine.Request {
		var reqs []engine.Request
		for i := range n {
			reqs = append(reqs, engine.Request{
				ID: i, Prompt: join(system, randomTokens(rng, 3+rng.IntN(12))), MaxTokens: 5 + rng.IntN(6),
				IgnoreEOS: true, KeepLogits: true, Sampling: s, N: samples,
			})
			reqs[i].Sampling.Seed = uint64(i)
		}
		return reqs
	}
	aligned := randomTokens(rng, 32)
	var unrelated []engine.Request
	for i := range 4 {
		unrelated = append(unrelated, engine.Request{ID: i, Prompt: randomTokens(rng, 20+i), MaxTokens: 4, IgnoreEOS: true, KeepLogits: true})
	}
	hot := engine.Sampling{Temperature: 0.9, TopP: 0.95}

	for _, tc := range []struct {
		name  string
		edit  func(*engine.Config)
		reqs  []engine.Request
		gap   int // steps between submissions
		check func(t *testing.T, e *engine.Engine)
	}{
		{
			name: "shared system prompt", reqs: shared(6, engine.Sampling{}, 1), gap: 6,
			check: wantCached(5 * 36), // every later request reuses 9 whole blocks
		},
		{
			name: "block size 1", edit: func(c *engine.Config) { c.BlockSize = 1; c.NumBlocks = 512 },
			reqs: shared(4, engine.Sampling{}, 1), gap: 6,
			check: wantCached(3 * 37),
		},
		{
			name: "block size 16", edit: func(c *engine.Config) { c.BlockSize = 16; c.NumBlocks = 32 },
			reqs: shared(4, engine.Sampling{}, 1), gap: 6,
			check: wantCached(3 * 32),
		},
		{
			name: "full-prefix hit", gap: 6,
			reqs: []engine.Request{
				{ID: 0, Prompt: aligned, MaxTokens: 6, IgnoreEOS: true, KeepLogits: true},
				{ID: 1, Prompt: aligned, MaxTokens: 6, IgnoreEOS: true, KeepLogits: true},
				{ID: 2, Prompt: aligned[:24], MaxTokens: 6, IgnoreEOS: true, KeepLogits: true},
			},
			check: wantCached(32 + 24),
		},
		{
			name: "sampled", reqs: shared(5, hot, 1), gap: 6,
			check: wantCached(4 * 36),
		},
		{
			name: "four samples per request", reqs: shared(3, hot, 4), gap: 8,
			check: func(t *testing.T, e *engine.Engine) {
				wantCached(2*36)(t, e)
				require.Equal(t, 3*3, e.Stats().Forks)
			},
		},
		{
			name: "submitted together", reqs: shared(6, engine.Sampling{}, 1), gap: 0,
		},
		{
			name: "cost-aware admission", edit: func(c *engine.Config) { c.Admission = engine.AdmitCostAware },
			reqs: shared(6, engine.Sampling{}, 1), gap: 6,
			check: wantCached(5 * 36),
		},
		{
			// One sample each: with forks, the engine can fail a sample whose
			// copy-on-write finds the pool dry (TestPitfallCopyOnWriteNeedsAFreeBlock).
			name: "pool under pressure", edit: func(c *engine.Config) { c.NumBlocks = 22 },
			reqs: shared(8, hot, 1), gap: 3,
			check: func(t *testing.T, e *engine.Engine) {
				require.Positive(t, e.Stats().CachedTokens, "the cache must still be used")
				require.Positive(t, e.Pool().Cache().Stats().Evicted, "the pool must have been short")
			},
		},
		{
			name: "nothing shared", reqs: unrelated, gap: 4,
			check: wantCached(0),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			if tc.edit != nil {
				tc.edit(&c)
			}
			want := baseline(t, m, c, tc.reqs)
			have, e := serve(t, m, cached(c, blockhash.PrefixCache), tc.reqs, tc.gap)
			requireSame(t, have, want)
			if tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// wantCached checks the number of prompt tokens served from the cache.
func wantCached(n int) func(*testing.T, *engine.Engine) {
	return func(t *testing.T, e *engine.Engine) {
		t.Helper()
		if have := e.Stats().CachedTokens; have != n {
			t.Fatalf("cached tokens: have %d; want %d", have, n)
		}
	}
}

// TestMultiTurnReusesTheAnswer: a follow-up whose prompt is the first
// turn's prompt and answer reuses both, because the engine commits a
// finished sequence's output too.
func TestMultiTurnReusesTheAnswer(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(3, 4))
	first := engine.Request{ID: 0, Prompt: randomTokens(rng, 21), MaxTokens: 10, IgnoreEOS: true, KeepLogits: true}
	answer := baseline(t, m, testConfig(), []engine.Request{first})[0].Tokens
	second := engine.Request{ID: 1, Prompt: join(first.Prompt, answer, randomTokens(rng, 5)), MaxTokens: 6, IgnoreEOS: true, KeepLogits: true}
	reqs := []engine.Request{first, second}

	want := baseline(t, m, testConfig(), reqs)
	have, e := serve(t, m, cached(testConfig(), blockhash.PrefixCache), reqs, 40) // the first turn finishes first
	requireSame(t, have, want)
	// The last answer token was never fed back, so its KV does not exist:
	// 21 + 10 - 1 = 30 tokens of KV, 7 whole blocks.
	if have, want := e.Stats().CachedTokens, 28; have != want {
		t.Fatalf("cached tokens for the second turn: have %d; want %d", have, want)
	}
}

package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// tailConfig is testConfig with design pc and kept partial blocks.
func tailConfig(name string, tails int) Config {
	c := testConfig()
	c.PrefixCache = missDesigns[name]
	c.TailBlocks = tails
	return c
}

// TestTailBlocksRepeatAndContinue runs one prompt of 4 blocks and 2
// tokens, then the same prompt again, then a next turn that continues
// everything the first run computed. With kept tails the repeat computes
// only its last token and the next turn only its new ones, where without
// them each computes again every token after the last whole block; the
// tokens and logits are those of an engine without a cache either way.
//
// Gemma-3's sliding-window layers run too: the kept block's rows are
// copied for every layer, and the window is applied at the position.
func TestTailBlocksRepeatAndContinue(t *testing.T) {
	for mname, m := range map[string]*model.Model{
		"llama":  loadTestModel(t, "llama"),
		"gemma3": modeltest.LoadOptions(t, modeltest.Gemma3Options(7)),
	} {
		vocab := m.Config.VocabSize
		for name := range missDesigns {
			t.Run(mname+"/"+name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(3, 4))
				p := randomPrompt(rng, 18, vocab)
				ref := testConfig()
				first := Request{ID: 1, Prompt: p, MaxTokens: 6, KeepLogits: true, IgnoreEOS: true}
				want1 := solo(t, m, ref, []Request{first})[1]

				e := newTestEngine(t, m, tailConfig(name, 8))
				got1 := e.RunAll([]Request{first})[1]
				require.NoError(t, got1.Err)
				require.Equal(t, want1.Tokens, got1.Tokens)
				require.Zero(t, got1.Cached)

				// The same prompt: 16 tokens from the cache, 2 from the tail.
				before := e.Stats().PrefillTokens
				again := first
				again.ID = 2
				got2 := e.RunAll([]Request{again})[2]
				require.NoError(t, got2.Err)
				require.Equal(t, len(p), got2.Cached)
				require.Equal(t, 1, e.Stats().PrefillTokens-before, "a full hit recomputes only the last prompt token")
				require.Equal(t, want1.Tokens, got2.Tokens)
				require.Equal(t, want1.Logits, got2.Logits)

				// The next turn: the 23 tokens with KV (the prompt and 5 of the
				// 6 outputs; the sixth was never fed back) and 3 new ones.
				next := Request{ID: 3, Prompt: slices.Concat(p, got1.Tokens[:5], randomPrompt(rng, 3, vocab)),
					MaxTokens: 4, KeepLogits: true, IgnoreEOS: true}
				want3 := solo(t, m, ref, []Request{next})[3]
				before = e.Stats().PrefillTokens
				got3 := e.RunAll([]Request{next})[3]
				require.NoError(t, got3.Err)
				require.Equal(t, 23, got3.Cached, "5 whole blocks and a tail of 3")
				require.Equal(t, 3, e.Stats().PrefillTokens-before)
				require.Equal(t, want3.Tokens, got3.Tokens)
				require.Equal(t, want3.Logits, got3.Logits)

				st := e.Pool().TailStats()
				require.Equal(t, 2, st.Hits)
				require.Equal(t, 2+3, st.Tokens)
				require.LessOrEqual(t, st.Held, 8)
			})
		}
	}
}

// TestTailBlocksOffByDefault: the default configuration reuses whole
// blocks only, so a repeated prompt computes its partial block again and
// the miss ledger names it partial.
func TestTailBlocksOffByDefault(t *testing.T) {
	m := loadTestModel(t, "llama")
	rng := rand.New(rand.NewPCG(5, 6))
	p := randomPrompt(rng, 18, m.Config.VocabSize)
	e := newTestEngine(t, m, tailConfig("radix", 0))
	e.RunAll([]Request{{ID: 1, Prompt: p, MaxTokens: 2}})
	got := e.RunAll([]Request{{ID: 2, Prompt: p, MaxTokens: 2}})[2]
	require.NoError(t, got.Err)
	require.Equal(t, 16, got.Cached)
	require.Equal(t, 2, got.Misses.Partial)
	require.Zero(t, e.Pool().TailStats())
}

// TestTailBlocksKeepSalts: a tail is kept under its sequence's salt, so
// another tenant's identical prompt finds none of it.
func TestTailBlocksKeepSalts(t *testing.T) {
	m := loadTestModel(t, "llama")
	rng := rand.New(rand.NewPCG(7, 8))
	p := randomPrompt(rng, 18, m.Config.VocabSize)
	for name := range missDesigns {
		t.Run(name, func(t *testing.T) {
			e := newTestEngine(t, m, tailConfig(name, 8))
			e.RunAll([]Request{{ID: 1, Prompt: p, MaxTokens: 1, CacheSalt: "a"}})
			other := e.RunAll([]Request{{ID: 2, Prompt: p, MaxTokens: 1, CacheSalt: "b"}})[2]
			require.NoError(t, other.Err)
			require.Zero(t, other.Cached)
			same := e.RunAll([]Request{{ID: 3, Prompt: p, MaxTokens: 1, CacheSalt: "a"}})[3]
			require.Equal(t, len(p), same.Cached)
		})
	}
}

// TestTailBlocksDivergingTogether opens two sequences on one kept tail in
// the same step: one shares a single token of it and writes its own next,
// the other shares both. Each must get a private copy of the block: were
// they to share it, one would write its rows where the other reads.
func TestTailBlocksDivergingTogether(t *testing.T) {
	m := loadTestModel(t, "llama")
	vocab := m.Config.VocabSize
	for name := range missDesigns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, 10))
			p := randomPrompt(rng, 18, vocab)
			fork := slices.Clone(p)
			fork[17] = (fork[17] + 1) % int32(vocab)
			reqs := []Request{
				{ID: 2, Prompt: fork, MaxTokens: 5, KeepLogits: true, IgnoreEOS: true},
				{ID: 3, Prompt: p, MaxTokens: 5, KeepLogits: true, IgnoreEOS: true},
			}
			want := solo(t, m, testConfig(), reqs)

			e := newTestEngine(t, m, tailConfig(name, 8))
			e.RunAll([]Request{{ID: 1, Prompt: p, MaxTokens: 1}})
			got := e.RunAll(reqs)
			require.Equal(t, 17, got[2].Cached)
			require.Equal(t, 18, got[3].Cached)
			for _, r := range reqs {
				require.Equal(t, want[r.ID].Tokens, got[r.ID].Tokens, "request %d", r.ID)
				require.Equal(t, want[r.ID].Logits, got[r.ID].Logits, "request %d", r.ID)
			}
		})
	}
}

// TestTailBlocksUnderPressure runs many prompts, some repeated, through a
// pool too small to keep everything: tails are given back before cached
// blocks are evicted, the audit holds at every step (testConfig), the
// store stays within its bound, and every answer is the cacheless one.
func TestTailBlocksUnderPressure(t *testing.T) {
	m := loadTestModel(t, "llama")
	vocab := m.Config.VocabSize
	for name := range missDesigns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			var prompts [][]int32
			for range 6 {
				prompts = append(prompts, randomPrompt(rng, 9+rng.IntN(12), vocab))
			}
			var reqs []Request
			for i := range 30 {
				reqs = append(reqs, Request{ID: i, Prompt: prompts[rng.IntN(len(prompts))], MaxTokens: 1 + rng.IntN(4), KeepLogits: true, IgnoreEOS: true})
			}
			ref := testConfig()
			want := solo(t, m, ref, reqs)

			c := tailConfig(name, 4)
			c.NumBlocks = 16
			e := newTestEngine(t, m, c)
			hits := 0
			for i := 0; i < len(reqs); i += 3 {
				batch := reqs[i:min(i+3, len(reqs))]
				got := e.RunAll(batch)
				for _, r := range batch {
					require.NoError(t, got[r.ID].Err)
					require.Equal(t, want[r.ID].Tokens, got[r.ID].Tokens, "request %d", r.ID)
					require.Equal(t, want[r.ID].Logits, got[r.ID].Logits, "request %d", r.ID)
					if got[r.ID].Cached%c.BlockSize != 0 {
						hits++
					}
				}
				require.LessOrEqual(t, e.Pool().TailStats().Held, 4)
			}
			require.Positive(t, hits, "some request must have continued a kept tail")
			require.Positive(t, e.Stats().Misses.Evicted, "the pool must have been under pressure")
		})
	}
}

// TestTailBlocksValidate: tails need a prefix cache and a count ≥ 0.
func TestTailBlocksValidate(t *testing.T) {
	c := testConfig()
	c.TailBlocks = 4
	require.ErrorContains(t, c.Validate(1<<20), "kept partial blocks")
	c = tailConfig("radix", -1)
	require.ErrorContains(t, c.Validate(1<<20), "kept partial blocks")
	c = tailConfig("radix", 4)
	require.NoError(t, c.Validate(1<<20))
}

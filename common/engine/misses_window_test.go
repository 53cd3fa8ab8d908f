package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model/modeltest"
)

// TestNoTokenMissesForTheWindow shows that neither a sliding window nor the
// context limit makes a prompt token computed again, on each design: a
// Gemma-3 prompt five windows long, sent again with a suffix, reuses every
// whole block (its sliding layers kept theirs, since WindowFree cannot go
// with a prefix cache), its answer is the one an engine without a cache
// gives, and the only missed tokens are the suffix's. A prompt past the
// context is refused, never cut and recomputed.
func TestNoTokenMissesForTheWindow(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	rng := rand.New(rand.NewPCG(9, 10))
	base := randomPrompt(rng, 5*modeltest.GemmaWindow, m.Config.VocabSize) // 10 whole blocks
	again := append(append([]int32(nil), base...), randomPrompt(rng, 3, m.Config.VocabSize)...)
	plain := newTestEngine(t, m, testConfig())
	want := plain.RunAll([]Request{{ID: 1, Prompt: again, MaxTokens: 6, IgnoreEOS: true}})[1]
	require.NoError(t, want.Err)
	for name, pc := range missDesigns {
		t.Run(name, func(t *testing.T) {
			c := testConfig()
			c.PrefixCache = pc
			c.WindowFree = true
			_, err := New(m, c)
			require.ErrorContains(t, err, "out-of-window blocks cannot go with a prefix cache", "a cached prefix would have lost its window's KV")
			c.WindowFree = false
			e := newTestEngine(t, m, c)
			first, _ := checkMisses(t, e, []Request{{ID: 1, Prompt: base, MaxTokens: 6, IgnoreEOS: true}})
			require.Equal(t, len(base), first.Cold, "%+v", first)
			res := e.RunAll([]Request{{ID: 2, Prompt: again, MaxTokens: 6, IgnoreEOS: true}})[2]
			require.NoError(t, res.Err)
			require.Equal(t, len(base), res.Cached, "every whole block past the window is reused")
			require.Equal(t, 3, res.Misses.Partial, "%+v", res.Misses)
			require.Equal(t, 3, res.Misses.Total(), "%+v", res.Misses)
			require.Equal(t, want.Tokens, res.Tokens, "the reused prefix answers as a full recompute does")

			long := randomPrompt(rng, e.ContextLimit(), m.Config.VocabSize)
			require.ErrorContains(t, e.Submit(Request{ID: 3, Prompt: long, MaxTokens: 1}), "context")
		})
	}
}

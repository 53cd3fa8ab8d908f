package main

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestPromptArrivingMidPrefillReusesFinishedChunks: a 101-token prompt is
// prefilled in chunks of 32 under the step budget; a second request with
// the same 96-token prefix arrives after the first chunk. Chunks already
// being prefilled go first, so it is admitted in the step that computes the
// long prompt's last 5 tokens — when its first 96 are computed but the
// prompt is not finished. With the per-chunk commit it finds those 96;
// committing only at prompt end it finds nothing and computes them again.
// Both produce the baseline's tokens.
func TestPromptArrivingMidPrefillReusesFinishedChunks(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(11, 1))
	shared := tokens(rng, 96) // three chunks of 32, the step budget
	long := request(1, join(shared, tokens(rng, 5)), 4)
	late := request(2, join(shared, tokens(rng, 7)), 4)
	want := run(t, m, baseline(config()), long, late)

	for _, tc := range []struct {
		policy     engine.CommitPolicy
		wantCached int
	}{
		{engine.CommitEveryChunk, 96}, // three finished chunks, 24 whole blocks of 4
		{engine.CommitPromptEnd, 0},
	} {
		c := config()
		c.Commit = tc.policy
		e := newEngine(t, m, c)
		res := map[int]*result{1: {}, 2: {}}
		collect := func(outs []engine.Output) {
			for _, o := range outs {
				require.NoError(t, o.Err)
				r := res[o.ID]
				r.cached = o.Cached
				r.tokens = append(r.tokens, o.Token)
				r.logits = append(r.logits, o.Logits)
			}
		}
		require.NoError(t, e.Submit(long))
		collect(e.Step()) // the first chunk of the long prompt
		require.NoError(t, e.Submit(late))
		for e.Busy() {
			collect(e.Step())
		}
		assert.Equal(t, tc.wantCached, res[2].cached, "policy %d: cached tokens of the request that arrived mid-prefill", tc.policy)
		requireSame(t, res, want)
	}
}

// TestRequestsSubmittedTogetherDoNotShareTheirPrefix pins a limit every
// engine here shares with vLLM and SGLang: two requests admitted in the
// same step both compute their common prefix, because neither has
// committed anything when the other is matched. Only a later arrival
// reuses it.
func TestRequestsSubmittedTogetherDoNotShareTheirPrefix(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(8, 2))
	shared := tokens(rng, 16) // 4 whole blocks
	a := request(1, join(shared, tokens(rng, 3)), 2)
	b := request(2, join(shared, tokens(rng, 3)), 2)
	e := newEngine(t, m, config())
	res := serve(t, e, 100_000, a, b)
	assert.Zero(t, res[1].cached)
	assert.Zero(t, res[2].cached, "admitted in the same step as the first: nothing to reuse yet")
	assert.Equal(t, 2*19, e.Stats().PrefillTokens, "both prompts computed whole")

	later := serve(t, e, 100_000, request(3, join(shared, tokens(rng, 3)), 2))
	require.NoError(t, later[3].err)
	assert.Equal(t, 16, later[3].cached, "a later arrival finds the shared blocks")
}

// TestNextTurnReusesTheOutput: a finished request commits its prompt and
// its output, so the next turn of the conversation — the whole exchange
// plus a new question — finds both (phase08_compressed/PITFALLS.md,
// "Inserting only the prompt at finish", which loses the answer).
func TestNextTurnReusesTheOutput(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(28, 1))
	first := request(1, tokens(rng, 8), 9)
	e := newEngine(t, m, config())
	out := serve(t, e, 100_000, first)[1].tokens
	require.Len(t, out, 9)
	// The 9th output token was never fed back, so its KV does not exist:
	// 8 prompt + 8 output tokens are cached, four whole blocks.
	next := request(2, join(first.Prompt, out, tokens(rng, 3)), 2)
	have := serve(t, e, 100_000, next)
	assert.Equal(t, 16, have[2].cached, "prompt and answer of the first turn")
	requireSame(t, have, run(t, m, baseline(config()), next))
}

package main

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPitfallFinishCommitsOnlyComputedKV is the PITFALLS.md entry
// "Committing the newest token, whose KV was never written": a finished
// request offers the cache its prompt and output, all but the newest token,
// which was sampled and never fed back, so its KV was never written. With 8
// prompt and 8 output tokens at block size 4, the 16th position completes a
// fourth block whose last slot holds no KV of this conversation: only three
// blocks may be cached, and the next turn must reuse 12 tokens and match
// the uncached run bit for bit.
func TestPitfallFinishCommitsOnlyComputedKV(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(15, 1))
	first := request(1, tokens(rng, 8), 8)
	e := newEngine(t, m, config())
	out := serve(t, e, 100_000, first)[1].tokens
	require.Len(t, out, 8)
	whole := join(first.Prompt, out)
	matched := e.Pool().MatchLen("", whole)
	next := request(2, join(whole, tokens(rng, 3)), 2)
	have := serve(t, e, 100_000, next)
	want := run(t, m, baseline(config()), next)
	g, wrong := resultGap(have, want)
	t.Logf("after a turn of 8 prompt and 8 output tokens (the last one's KV never computed): the cache matches %d of the 16; the next turn reuses %d, %d requests differ from the uncached run, logits by up to %.3g",
		matched, have[2].cached, wrong, g)
	require.Equal(t, 12, matched, "three whole blocks: the fourth holds the newest token's slot, never written")
	require.Equal(t, 12, have[2].cached)
	requireSame(t, have, want)
}

package main

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestPitfallCachedTokensAreCountedAtFirstAdmission is the PITFALLS.md
// entry "Counting a readmitted request's own blocks as cached tokens": a
// request that is preempted and readmitted finds its own prompt blocks in
// the cache (it committed them while it ran). That is recompute saved, not
// a hit: the cached_tokens a client reads must stay what the prompt found
// on arrival. Unrelated prompts find nothing, so every request must report
// 0, while the engine's own count of matched tokens (Stats.MatchedTokens)
// includes the readmissions.
func TestPitfallCachedTokensAreCountedAtFirstAdmission(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(34, 1))
	c := config()
	c.NumBlocks = 14 // decodes outgrow the pool: the youngest is preempted
	var reqs []engine.Request
	for i := range 6 {
		reqs = append(reqs, request(i, tokens(rng, 10+rng.IntN(8)), 12))
	}
	e := newEngine(t, m, c)
	res := serve(t, e, 100_000, reqs...)
	require.Positive(t, e.Stats().Preemptions, "the pool must have run dry")
	reported := 0
	for _, r := range res {
		reported += r.cached
	}
	st := e.Stats()
	t.Logf("%d preemptions: readmitted requests found %d tokens of their own in the cache (Stats.MatchedTokens: what counting them as hits would report); clients are told %d cached tokens (Stats.CachedTokens %d), for %d unrelated prompts",
		st.Preemptions, st.MatchedTokens, reported, st.CachedTokens, len(reqs))
	for id, r := range res {
		require.NoError(t, r.err)
		assert.Zero(t, r.cached, "request %d: cached tokens reported after its own readmission", id)
	}
	assert.Zero(t, e.Stats().CachedTokens, "what clients are told: nothing was found on arrival")
	assert.Positive(t, e.Stats().MatchedTokens, "what the cache lent: readmissions found their own blocks")
	requireSame(t, res, run(t, m, baseline(c), reqs...))
}

package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
)

// TestTieredCacheIsExact: with a host-memory tier under a pool too small
// for the workload's prefixes, every design's tokens and logits equal the
// uncached engine's bit for bit, in every KV dtype, while the tier really
// is used: blocks the cache evicted are promoted back, and the prompt
// tokens computed are fewer than without the tier.
func TestTieredCacheIsExact(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Options(model.ArchLlama, 5))
	for _, dt := range kernels.KVDTypes {
		base := tierRun(t, m, dt, nil, false)
		for _, v := range Variants {
			t.Run(fmt.Sprintf("%v/%s", dt, v.Name), func(t *testing.T) {
				plain := tierRun(t, m, dt, v.PrefixCache, false)
				tiered := tierRun(t, m, dt, v.PrefixCache, true)
				for i := range base.results {
					requireBitEqual(t, base.results[i], tiered.results[i], fmt.Sprintf("request %d with a tier, against the uncached run", i))
				}
				assert.Positive(t, tiered.counters.Demoted, "the cache evicted into the tier")
				require.Positive(t, slices.Max(tiered.counters.Promoted), "the tier gave blocks back")
				assert.Less(t, tiered.stats.PrefillTokens, plain.stats.PrefillTokens, "the tier saved prefill")
				t.Logf("prefill tokens: %d uncached, %d cache alone, %d cache and tier (%d blocks demoted, %v promoted)",
					base.stats.PrefillTokens, plain.stats.PrefillTokens, tiered.stats.PrefillTokens, tiered.counters.Demoted, tiered.counters.Promoted)
			})
		}
	}
}

type tierResult struct {
	results  []engine.Result
	stats    engine.Stats
	counters kvcache.TierCounters
}

// tierRun serves twelve conversations of two turns, each on its own
// 48-token prefix, in rounds that revisit them in a shuffled order, on a
// pool of 40 blocks of 8 tokens: about four prefixes fit, so by the time a
// conversation comes back its blocks were evicted. With tier, a RAM tier
// big enough for all of them sits under the cache.
func tierRun(t *testing.T, m *model.Model, dt kernels.KVDType, build cli.CacheBuilder, tier bool) tierResult {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.BlockSize, cfg.NumBlocks, cfg.MaxBatchTokens, cfg.MaxRunning = 8, 40, 32, 2
	cfg.PrefixCache, cfg.KVCacheDType, cfg.Audit = build, dt, true
	var ram *kvcache.RAMTier
	if tier {
		ram = kvcache.NewRAMTier(64<<20, nil)
		cfg.Tiers, cfg.TiersAlwaysPromote = []kvcache.Tier{ram}, true // counts independent of timing
	}
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	defer e.Close()

	var out tierResult
	out.results = serveConversations(t, e, int32(m.Config.VocabSize), nil)
	out.stats = e.Stats()
	out.counters = e.Pool().TierCounters()
	return out
}

// tierConvs and tierRounds shape serveConversations' workload.
const tierConvs, tierRounds = 12, 3

// serveConversations serves, on e, tierConvs conversations, each on its
// own 48-token prefix, in tierRounds rounds that revisit them in a
// shuffled order, each turn 4 tokens long. before, if set, is called
// before each request with its conversation and prompt, and returns what
// to call once the request is done.
func serveConversations(t *testing.T, e *engine.Engine, vocab int32, before func(conv int, prompt []int32) func(engine.Result)) []engine.Result {
	t.Helper()
	history := tierPrefixes(vocab)
	rng := rand.New(rand.NewPCG(1, 2))
	var out []engine.Result
	id := 0
	for r := range tierRounds {
		for _, c := range rng.Perm(tierConvs) {
			p := append(slices.Clone(history[c]), int32(3+7*r+c)%vocab, int32(11+r)%vocab)
			var after func(engine.Result)
			if before != nil {
				after = before(c, p)
			}
			res := e.RunAll([]engine.Request{{ID: id, Prompt: p, MaxTokens: 4, IgnoreEOS: true, KeepLogits: true}})
			require.NoError(t, res[id].Err, "request %d", id)
			out = append(out, *res[id])
			if after != nil {
				after(*res[id])
			}
			history[c] = append(p, res[id].Tokens...)
			id++
		}
	}
	return out
}

// tierPrefixes are serveConversations' conversations' prefixes.
func tierPrefixes(vocab int32) [][]int32 {
	out := make([][]int32, tierConvs)
	for c := range out {
		for j := range 48 {
			out[c] = append(out[c], int32(5+97*c+13*j)%vocab)
		}
	}
	return out
}

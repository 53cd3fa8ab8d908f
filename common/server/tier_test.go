package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
)

// TestTierHitsAreReported: a prompt whose blocks the pool evicted into a
// host-memory tier comes back from it, and the server says so where a
// client and a dashboard look: usage's cached_tokens_by_tier, /completion's
// tokens_cached_by_tier, the slot's n_prompt_tokens_cache_by_tier and
// /metrics' kvlab:tier_* series. The answer is the uncached engine's.
func TestTierHitsAreReported(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	cfg.NumBlocks, cfg.MaxRunning = 24, 2 // 96 tokens: one 40-token prompt at a time stays cached
	cfg.Tiers, cfg.TiersAlwaysPromote = []kvcache.Tier{kvcache.NewRAMTier(16<<20, nil)}, true
	ts := startServer(t, tm, cfg, Options{PrefixCaching: true})
	a := prompt(40, 1)
	for _, p := range [][]int32{a, prompt(40, 2), prompt(40, 3)} { // b and c push a's blocks out
		complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 2, "ignore_eos": true, "temperature": -1})
	}
	status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": a, "max_tokens": 3, "temperature": 0, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(raw))
	var c completionResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	by := c.Usage.PromptTokensDetails.CachedByTier
	require.NotNil(t, by, string(raw))
	assert.Positive(t, by["CPU"], "a's evicted blocks, from the tier: %s", raw)
	assert.Equal(t, 40, c.Usage.PromptTokensDetails.CachedTokens, "all ten blocks, from the pool or the tier")
	assert.Equal(t, 40, by["CPU"]+by["GPU"])
	want := reference(t, tm, engine.Request{ID: 1, Prompt: a, MaxTokens: 3, IgnoreEOS: true})[1]
	assert.Equal(t, tm.tok.Decode(want.Tokens), c.Choices[0].Text, "the answer from promoted blocks is the uncached one")

	r := complete(t, ts.url, map[string]any{"prompt": prompt(40, 2), "n_predict": 1, "id_slot": 0})
	require.NotNil(t, r.TokensCachedByTier)
	assert.Equal(t, r.TokensCached, r.TokensCachedByTier["CPU"]+r.TokensCachedByTier["GPU"])
	var slots []map[string]json.RawMessage
	getJSON(t, ts.url+"/slots", &slots)
	assert.Contains(t, slots[0], "n_prompt_tokens_cache_by_tier")

	resp, err := testClient.Get(ts.url + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, series := range []string{`kvlab:tier_hits_total{tier="CPU"}`, `kvlab:tier_blocks{tier="CPU"}`, "kvlab:tier_demotions_total"} {
		line := metricLine(string(body), series)
		require.NotEmpty(t, line, series)
		assert.NotEqual(t, series+" 0", line, "the tier was used")
	}
}

func metricLine(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, series+" ") {
			return l
		}
	}
	return ""
}

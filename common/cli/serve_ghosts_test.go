package cli

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricValue is the value of the series named exactly series in a
// Prometheus text page, or -1.
func metricValue(t *testing.T, page, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, l)
			return f
		}
	}
	return -1
}

// TestServeGhostsReportRivalPolicies: serve -prefix-caching -ghosts runs
// the rival eviction policies beside the radix tree on the same traffic,
// and /metrics says what each found: the real cache's hits are the
// engine's own count, the LRU ghost (the radix tree's policy) finds
// exactly as much, and every policy has its series. Without the prefix
// cache, -ghosts is refused.
func TestServeGhostsReportRivalPolicies(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-blocks", "8", "-prefix-caching", "-ghosts")
	for _, p := range []int{1, 101, 1, 151, 201, 1} {
		completion(t, url, tierPrompt(p))
	}
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	page := string(body)
	real := metricValue(t, page, `kvlab:ghost_hit_tokens_total{cache="real"}`)
	assert.Positive(t, real, "the repeated prompt was found")
	assert.Equal(t, metricValue(t, page, "kvlab:prefix_cache_hits_total"), real, "the real row is the engine's count")
	assert.Equal(t, real, metricValue(t, page, `kvlab:ghost_hit_tokens_total{cache="LRU"}`), "the LRU ghost is the radix tree's policy")
	for _, name := range []string{"LFU", "SLRU 80%", "ARC", "priority"} {
		assert.GreaterOrEqual(t, metricValue(t, page, `kvlab:ghost_hit_tokens_total{cache="`+name+`"}`), 0.0, name)
	}
	assert.Positive(t, metricValue(t, page, "kvlab:ghost_queried_tokens_total"))
	stop()
	require.NoError(t, <-done, log.String())

	err = Serve(context.Background(), cachedVariant, []string{"-port", "0", "-model", dir, "-ghosts"}, nil, &syncBuffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-ghosts")
}

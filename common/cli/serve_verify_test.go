package cli

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// metricsPage fetches /metrics.
func metricsPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// TestServeVerifyHitsCatchesACorruptBlock: serve -prefix-caching
// -verify-hits 1 on loopback; a prompt is cached, one of its cached blocks
// is damaged through the engine server's Do, and the same prompt sent
// again is a hit the verifier recomputes: /metrics counts one failure and
// one verified hit, the log names the block, and the prompt no longer
// finds the damaged block cached. A clean hit before that counts as
// verified, not failed. Without -prefix-caching the flag is refused.
func TestServeVerifyHitsCatchesACorruptBlock(t *testing.T) {
	dir := smallModel(t, "llama")
	built := make(chan *engine.Server, 1)
	serveBuilt = func(es *engine.Server) { built <- es }
	defer func() { serveBuilt = nil }()
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-blocks", "64", "-prefix-caching", "-verify-hits", "1")
	es := <-built
	serveBuilt = nil

	waitFor := func(series string, want float64) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			page := metricsPage(t, url)
			if metricValue(t, page, series) == want || time.Now().After(deadline) {
				return page
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	completion(t, url, tierPrompt(1))
	assert.Equal(t, 12.0, cachedTokens(completion(t, url, tierPrompt(1))), "the repeated prompt is a hit")
	page := waitFor("kvlab:prefix_cache_verified_total", 1)
	require.Equal(t, 1.0, metricValue(t, page, "kvlab:prefix_cache_verified_total"), page)
	require.Equal(t, 0.0, metricValue(t, page, "kvlab:prefix_cache_verify_failures_total"), "a clean hit verifies clean")
	require.Equal(t, 0.0, metricValue(t, page, "kvlab:prefix_cache_verify_skipped_total"))

	prompt := make([]int32, 12)
	for i := range prompt {
		prompt[i] = int32(1 + i)
	}
	var bad int32
	require.NoError(t, es.Do(func(e *engine.Engine) error {
		p := e.Pool()
		const probe = 1 << 30
		cached, err := p.Open(probe, "", prompt)
		require.NoError(t, err)
		require.Equal(t, 12, cached)
		bad = p.Pages(probe)[1]
		p.Release(probe)
		n := p.BlockSize() * p.KVDim()
		k, v := make([]float32, n), make([]float32, n)
		p.ReadBlock(0, bad, k, v)
		v[3] += 1
		return p.WriteBlock(0, bad, k, v)
	}))

	completion(t, url, tierPrompt(1))
	page = waitFor("kvlab:prefix_cache_verify_failures_total", 1)
	require.Equal(t, 1.0, metricValue(t, page, "kvlab:prefix_cache_verify_failures_total"), log.String())
	require.Equal(t, 2.0, metricValue(t, page, "kvlab:prefix_cache_verified_total"))
	require.Contains(t, log.String(), "(unsalted): cached block 1 (pool block "+strconv.Itoa(int(bad))+") layer 0 differs")
	// The damaged block and everything after it were forgotten, unless the
	// request was still running when the verdict came: then it was
	// preempted and computed them again, clean.
	want := 4.0
	if strings.Contains(log.String(), "preempted 1 sequences") {
		want = 12
	}
	assert.Equal(t, want, cachedTokens(completion(t, url, tierPrompt(1))))
	stop()
	require.NoError(t, <-done, log.String())

	err := Serve(context.Background(), cachedVariant, []string{"-port", "0", "-model", dir, "-verify-hits", "1"}, nil, &syncBuffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-verify-hits")
}

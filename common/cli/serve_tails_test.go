package cli

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeKeepsTailsByDefault: serve -prefix-caching, as shipped, answers
// a prompt it ran before with every prompt token cached, as a llama-server
// slot does, where -tail-blocks 0 finds only the whole blocks; the tokens
// are the cacheless server's either way, and /metrics counts the hit.
func TestServeKeepsTailsByDefault(t *testing.T) {
	dir := smallModel(t, "llama")
	body := `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "max_tokens": 3, "temperature": 0, "ignore_eos": true, "return_token_ids": true}`
	ids := func(r map[string]any) any { return r["choices"].([]any)[0].(map[string]any)["token_ids"] }

	plainURL, _, _, _ := startServe(t, cachedVariant, "-model", dir, "-block-size", "4")
	want := ids(completion(t, plainURL, body))
	for _, c := range []struct {
		args   []string
		cached float64
	}{
		{nil, 10},
		{[]string{"-tail-blocks", "0"}, 8},
	} {
		url, _, _, _ := startServe(t, cachedVariant, append([]string{"-model", dir, "-block-size", "4", "-prefix-caching"}, c.args...)...)
		first := completion(t, url, body)
		assert.Zero(t, cachedTokens(first))
		again := completion(t, url, body)
		assert.Equal(t, c.cached, cachedTokens(again), "%v", c.args)
		assert.Equal(t, want, ids(first))
		assert.Equal(t, want, ids(again))

		resp, err := testClient.Get(url + "/metrics")
		require.NoError(t, err)
		text, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		if c.cached == 10 {
			assert.Contains(t, string(text), "\nkvlab:prefix_cache_tail_hits_total 1\n")
		} else {
			assert.Contains(t, string(text), "\nkvlab:prefix_cache_tail_hits_total 0\n")
		}
	}
}

// TestServeTailBlocksFlag: -tail-blocks needs -prefix-caching and a count
// ≥ 0; the error names the flag.
func TestServeTailBlocksFlag(t *testing.T) {
	dir := smallModel(t, "llama")
	for _, args := range [][]string{
		{"-tail-blocks", "4"},
		{"-prefix-caching", "-tail-blocks", "-1"},
	} {
		err := Serve(context.Background(), cachedVariant, append([]string{"-port", "0", "-model", dir}, args...), nil, &syncBuffer{})
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), "-tail-blocks")
	}
}

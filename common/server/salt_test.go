package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestCacheSaltKeepsTenantsApart sends one 300-token prompt under two
// salts over real HTTP: the second tenant must find nothing cached (its
// time to first token would otherwise tell it the first sent the prompt),
// the same tenant must find it, and every answer is the uncached engine's.
func TestCacheSaltKeepsTenantsApart(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	cfg.MaxContext = 320
	ts := startServer(t, tm, cfg, Options{ModelName: "test"})
	p := prompt(300, 7)
	plain := engineConfig(false) // the answer of a server without a cache
	plain.MaxContext = cfg.MaxContext
	ref, err := engine.New(tm.m, plain)
	require.NoError(t, err)
	want := ref.RunAll([]engine.Request{{ID: 1, Prompt: p, MaxTokens: 5, IgnoreEOS: true}})[1]
	ref.Close()
	require.NoError(t, want.Err)

	complete := func(salt string) (cached int, tokens []int32) {
		t.Helper()
		status, body := post(t, ts.url+"/v1/completions", map[string]any{
			"model": "test", "prompt": p, "max_tokens": 5, "temperature": 0, "ignore_eos": true,
			"return_token_ids": true, "cache_salt": salt,
		})
		require.Equal(t, http.StatusOK, status, string(body))
		var r completionResponse
		require.NoError(t, json.Unmarshal(body, &r))
		return r.Usage.PromptTokensDetails.CachedTokens, r.Choices[0].TokenIDs
	}
	check := func(what string, tokens []int32) {
		t.Helper()
		if diff := cmp.Diff(want.Tokens, tokens); diff != "" {
			t.Fatalf("%s: tokens differ from the uncached engine's (-want +have):\n%s", what, diff)
		}
	}
	cached, tokens := complete("tenant-a")
	assert.Equal(t, 0, cached, "nothing was cached before")
	check("tenant a", tokens)
	cached, tokens = complete("tenant-b")
	assert.Equal(t, 0, cached, "another salt must not find tenant a's prompt")
	check("tenant b", tokens)
	cached, tokens = complete("tenant-a")
	assert.Greater(t, cached, 0, "the same salt shares")
	check("tenant a again", tokens)
	cached, _ = complete("")
	assert.Equal(t, 0, cached, "no salt shares only with no salt")

	// llama-server's endpoint carries the salt the same way.
	status, body := post(t, ts.url+"/completion", map[string]any{
		"prompt": p, "n_predict": 5, "temperature": 0, "ignore_eos": true, "cache_salt": "tenant-b",
	})
	require.Equal(t, http.StatusOK, status, string(body))
	var lr llamaResponse
	require.NoError(t, json.Unmarshal(body, &lr))
	assert.Greater(t, lr.TokensCached, 0, "tenant b's own earlier request is cached")
	assert.Equal(t, want.Tokens, lr.Tokens)

	// A salt /completion has not seen: nothing cached, although the
	// unsalted prompt is (a /completion that dropped the salt would find
	// it); then the same salt finds its own.
	llama := func(salt string) int {
		t.Helper()
		status, body := post(t, ts.url+"/completion", map[string]any{
			"prompt": p, "n_predict": 2, "temperature": 0, "ignore_eos": true, "cache_salt": salt,
		})
		require.Equal(t, http.StatusOK, status, string(body))
		var lr llamaResponse
		require.NoError(t, json.Unmarshal(body, &lr))
		return lr.TokensCached
	}
	assert.Equal(t, 0, llama("tenant-c"), "a new salt on /completion must not find the unsalted prompt")
	assert.Greater(t, llama("tenant-c"), 0, "and finds its own the second time")
}

// TestSamplesReportTheCachedPrefix: a request with several samples whose
// prompt is cached reports the same cached_tokens as a single sample: the
// samples forked off the prompt carry the first admission's count, or a
// router reading usage would see 0 for every n > 1 request.
func TestSamplesReportTheCachedPrefix(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{ModelName: "test"})
	p := prompt(40, 3)
	cached := func(n int) int {
		t.Helper()
		status, body := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 4, "n": n, "ignore_eos": true})
		require.Equal(t, http.StatusOK, status, string(body))
		var r completionResponse
		require.NoError(t, json.Unmarshal(body, &r))
		return r.Usage.PromptTokensDetails.CachedTokens
	}
	require.Equal(t, 0, cached(1), "nothing cached yet")
	one := cached(1)
	require.Positive(t, one)
	assert.Equal(t, one, cached(3), "three samples of the same cached prompt")
}

func TestCacheSaltMustBeAString(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{ModelName: "test"})
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 1, "cache_salt": 7}},
		{"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 1, "cache_salt": []string{"a"}}},
		{"/completion", map[string]any{"prompt": "hi", "n_predict": 1, "cache_salt": true}},
	} {
		status, body := post(t, ts.url+tc.path, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s: %s", tc.path, body)
		assert.Contains(t, string(body), `\"cache_salt\" must be a string`, tc.path)
	}
}

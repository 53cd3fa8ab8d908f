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

func prompt(n int, seed int32) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = (seed*31 + int32(i)*17) % 500
	}
	return p
}

func TestCompletionReturnsTheEnginesTokens(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{ModelName: "test"})
	p := prompt(20, 1)
	want := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 9, IgnoreEOS: true})[1]

	status, body := post(t, ts.url+"/v1/completions", map[string]any{
		"model": "test", "prompt": p, "max_tokens": 9, "temperature": 0, "ignore_eos": true, "return_token_ids": true,
	})
	require.Equal(t, http.StatusOK, status, string(body))
	var r completionResponse
	require.NoError(t, json.Unmarshal(body, &r))
	require.Len(t, r.Choices, 1)
	assert.Equal(t, "text_completion", r.Object)
	assert.Equal(t, "test", r.Model)
	if diff := cmp.Diff(want.Tokens, r.Choices[0].TokenIDs); diff != "" {
		t.Fatalf("tokens differ from the engine's (-want +have):\n%s", diff)
	}
	assert.Equal(t, "length", *r.Choices[0].FinishReason)
	assert.Equal(t, streamed(tm, want.Tokens), r.Choices[0].Text)
	assert.Equal(t, usageOf(20, 9, 0), *r.Usage)
}

func usageOf(prompt, completion, cached int) usage {
	u := usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	u.PromptTokensDetails.CachedTokens = cached
	return u
}

func TestStreamedCompletionIsFramedAndComplete(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(13, 2)
	want := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 7, IgnoreEOS: true})[1]

	evs := stream(t, ts.url+"/v1/completions", map[string]any{
		"prompt": p, "max_tokens": 7, "temperature": 0, "ignore_eos": true, "return_token_ids": true,
		"stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	require.GreaterOrEqual(t, len(evs), 3)
	assert.Equal(t, "[DONE]", evs[len(evs)-1], "the stream ends with [DONE]")
	var tokens []int32
	var text string
	for i, ev := range evs[:len(evs)-2] {
		var c completionResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &c), ev)
		require.Len(t, c.Choices, 1)
		assert.Nil(t, c.Usage, "usage comes in its own last chunk")
		tokens = append(tokens, c.Choices[0].TokenIDs...)
		text += c.Choices[0].Text
		if i < len(evs)-3 {
			assert.Nil(t, c.Choices[0].FinishReason, "event %d: only the last chunk finishes", i)
		} else {
			require.NotNil(t, c.Choices[0].FinishReason)
			assert.Equal(t, "length", *c.Choices[0].FinishReason)
		}
	}
	assert.Equal(t, want.Tokens, tokens)
	assert.Equal(t, streamed(tm, want.Tokens), text)
	var last completionResponse
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-2]), &last))
	assert.Empty(t, last.Choices)
	require.NotNil(t, last.Usage)
	assert.Equal(t, usageOf(13, 7, 0), *last.Usage)
}

func TestCachedTokensReportTheEnginesPrefixHits(t *testing.T) {
	// A second request that shares a prefix with the first reports as
	// cached exactly the block-aligned part of that prefix, and returns
	// what a server without the cache returns.
	tm := loadTestModel(t)
	cached := startServer(t, tm, engineConfig(true), Options{PrefixCaching: true})
	plain := startServer(t, tm, engineConfig(false), Options{})
	shared := prompt(22, 3) // 5 whole blocks of 4, and 2 tokens more
	first := append(append([]int32{}, shared...), 7, 8, 9)
	second := append(append([]int32{}, shared...), 10, 11)

	ask := func(url string, p []int32) completionResponse {
		status, body := post(t, url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 5, "temperature": 0, "ignore_eos": true, "return_token_ids": true})
		require.Equal(t, http.StatusOK, status, string(body))
		var r completionResponse
		require.NoError(t, json.Unmarshal(body, &r))
		return r
	}
	a := ask(cached.url, first)
	assert.Equal(t, 0, a.Usage.PromptTokensDetails.CachedTokens, "nothing was cached before")
	b := ask(cached.url, second)
	assert.Equal(t, 20, b.Usage.PromptTokensDetails.CachedTokens, "the 5 whole shared blocks")
	assert.Equal(t, 20, cached.es.Snapshot().Stats.CachedTokens-0, "the engine's own count of matched tokens")
	assert.Equal(t, ask(plain.url, second).Choices[0].TokenIDs, b.Choices[0].TokenIDs, "the cache changes no token")

	// The same prompt again: every whole block is found.
	c := ask(cached.url, second)
	assert.Equal(t, 24, c.Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, b.Choices[0].TokenIDs, c.Choices[0].TokenIDs)
}

func TestSamplesAreChoices(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(9, 4)
	var want [][]int32
	for i := range 3 {
		r := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 6, IgnoreEOS: true, Sampling: engine.Sampling{Temperature: 1, Seed: 42 + uint64(i)}})[1]
		want = append(want, r.Tokens)
	}
	status, body := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 6, "n": 3, "seed": 42, "temperature": 1, "ignore_eos": true, "return_token_ids": true})
	require.Equal(t, http.StatusOK, status, string(body))
	var r completionResponse
	require.NoError(t, json.Unmarshal(body, &r))
	require.Len(t, r.Choices, 3)
	for i, c := range r.Choices {
		assert.Equal(t, i, c.Index)
		assert.Equal(t, want[i], c.TokenIDs, "sample %d is the single-sample run with seed+%d", i, i)
	}
	assert.Equal(t, 18, r.Usage.CompletionTokens)
}

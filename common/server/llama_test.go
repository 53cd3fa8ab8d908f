package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

func TestLlamaCompletionReportsCachedTokensAndTimings(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{PrefixCaching: true, Slots: 4})
	p := prompt(18, 6)
	want := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 5, IgnoreEOS: true})[1]

	ask := func() llamaResponse {
		status, body := post(t, ts.url+"/completion", map[string]any{"prompt": p, "n_predict": 5, "temperature": 0, "ignore_eos": true, "cache_prompt": true, "id_slot": 3})
		require.Equal(t, http.StatusOK, status, string(body))
		var r llamaResponse
		require.NoError(t, json.Unmarshal(body, &r))
		return r
	}
	first := ask()
	assert.Equal(t, want.Tokens, first.Tokens)
	assert.Equal(t, streamed(tm, want.Tokens), first.Content)
	assert.True(t, first.Stop)
	assert.Equal(t, 3, first.IDSlot, "the slot asked for is reported back")
	assert.Equal(t, "limit", first.StopType)
	assert.Equal(t, 0, first.TokensCached)
	require.NotNil(t, first.Timings)
	assert.Equal(t, 18, first.Timings.PromptN)
	assert.Equal(t, 5, first.Timings.PredictedN)
	assert.Positive(t, first.Timings.PromptMS)

	second := ask()
	assert.Equal(t, 16, second.TokensCached, "4 whole blocks of the 18-token prompt")
	assert.Equal(t, 2, second.Timings.PromptN, "only the tokens not found are computed")
	assert.Equal(t, 16, second.Timings.CacheN)
	assert.Equal(t, first.Tokens, second.Tokens)
}

func TestLlamaCompletionStreams(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(10, 7)
	want := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 6, IgnoreEOS: true})[1]
	evs := stream(t, ts.url+"/completion", map[string]any{"prompt": p, "n_predict": 6, "temperature": 0, "ignore_eos": true, "stream": true})
	var tokens []int32
	for i, ev := range evs {
		var r llamaResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &r), ev)
		tokens = append(tokens, r.Tokens...)
		assert.Equal(t, i == len(evs)-1, r.Stop, "event %d: only the last one stops", i)
		if r.Stop {
			assert.Equal(t, 6, r.TokensPredicted)
			assert.NotNil(t, r.Timings)
		}
	}
	assert.Equal(t, want.Tokens, tokens)
}

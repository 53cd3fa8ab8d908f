package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestSeedZeroIsASeed checks that seed 0 is a seed like any other on both
// APIs, as in vLLM (any integer seeds; absent is random) and llama-server
// (only -1, its LLAMA_DEFAULT_SEED 0xFFFFFFFF, is random): two sampled
// requests with seed 0 return the tokens of the engine run with Seed 0,
// and seed 1 returns those of Seed 1, which differ. The expectations come
// from the reference engine, so the test is deterministic; a server that
// took 0 for "random" or "unset" would draw a seed of its own and miss the
// Seed 0 tokens (at temperature 1.5 over 24 tokens, by every chance).
func TestSeedZeroIsASeed(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := []int32{11, 42, 7, 300, 5, 90, 128, 64, 3}
	const n, temp = 24, 1.5
	want := func(seed uint64) []int32 {
		r := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: n, IgnoreEOS: true, Sampling: engine.Sampling{Temperature: temp, TopP: 1, Seed: seed}})[1]
		require.Len(t, r.Tokens, n)
		return r.Tokens
	}
	want0, want1 := want(0), want(1)
	require.NotEqual(t, want0, want1, "seeds 0 and 1 sample the same tokens: the test would prove nothing")

	openAI := func(seed int64) []int32 {
		status, body := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": n, "temperature": temp, "top_p": 1, "seed": seed, "ignore_eos": true, "return_token_ids": true})
		require.Equal(t, http.StatusOK, status, string(body))
		var r struct {
			Choices []struct {
				TokenIDs []int32 `json:"token_ids"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(body, &r), string(body))
		require.Len(t, r.Choices, 1, string(body))
		return r.Choices[0].TokenIDs
	}
	llama := func(seed int64) []int32 {
		status, body := post(t, ts.url+"/completion", map[string]any{"prompt": p, "n_predict": n, "temperature": temp, "top_p": 1, "seed": seed, "ignore_eos": true})
		require.Equal(t, http.StatusOK, status, string(body))
		var r struct {
			Tokens []int32 `json:"tokens"`
		}
		require.NoError(t, json.Unmarshal(body, &r), string(body))
		return r.Tokens
	}
	for name, ask := range map[string]func(int64) []int32{"/v1/completions": openAI, "/completion": llama} {
		for i := range 2 {
			require.Equal(t, want0, ask(0), "%s with seed 0, request %d: not the tokens of seed 0", name, i+1)
		}
		require.Equal(t, want1, ask(1), "%s with seed 1", name)
	}
}

package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPromptThatExactlyFitsIsServed pins fitContext's boundary through
// HTTP, with a context of 64 tokens (the pool's 16 blocks of 4): a prompt
// and an explicit max_tokens that fill it exactly are served to the last
// token, one token more is the documented 400 context_length_exceeded
// naming max_tokens; a prompt of 63 tokens leaves room for one token and
// is served, one of 64 leaves none and is refused naming prompt. The same
// prompt boundary holds on llama-server's /completion, where n_predict is
// cut to what fits rather than refused.
func TestPromptThatExactlyFitsIsServed(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(false)
	cfg.NumBlocks = 16
	ts := startServer(t, tm, cfg, Options{})
	const limit = 64
	require.Equal(t, limit, ts.es.ContextLimit())
	ids := func(n int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(1 + i*7%500)
		}
		return p
	}

	type completion struct {
		Choices []struct {
			TokenIDs     []int32 `json:"token_ids"`
			FinishReason string  `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	serves := func(promptLen int, body map[string]any, wantTokens int) {
		t.Helper()
		body["prompt"], body["ignore_eos"], body["return_token_ids"] = ids(promptLen), true, true
		status, out := post(t, ts.url+"/v1/completions", body)
		require.Equal(t, http.StatusOK, status, "prompt of %d, %v: %s", promptLen, body["max_tokens"], out)
		var c completion
		require.NoError(t, json.Unmarshal(out, &c), string(out))
		require.Len(t, c.Choices, 1, string(out))
		require.Len(t, c.Choices[0].TokenIDs, wantTokens, string(out))
		require.Equal(t, "length", c.Choices[0].FinishReason, string(out))
		require.Equal(t, promptLen, c.Usage.PromptTokens)
		require.Equal(t, wantTokens, c.Usage.CompletionTokens)
	}
	refuses := func(path string, body map[string]any, param string) {
		t.Helper()
		status, out := post(t, ts.url+path, body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", path, out)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(out, &e), string(out))
		require.Equal(t, "context_length_exceeded", e.Error.Code, string(out))
		require.Equal(t, param, e.Error.Param, string(out))
		require.Contains(t, e.Error.Message, "maximum context length is 64 tokens", string(out))
	}

	serves(limit-5, map[string]any{"max_tokens": 5}, 5) // 59 + 5 = 64
	refuses("/v1/completions", map[string]any{"prompt": ids(limit - 5), "max_tokens": 6}, "max_tokens")
	serves(limit-1, map[string]any{"max_tokens": 1}, 1) // 63 + 1 = 64
	serves(limit-1, map[string]any{}, 1)                // no max_tokens: cut to the one that fits
	refuses("/v1/completions", map[string]any{"prompt": ids(limit)}, "prompt")
	refuses("/v1/completions", map[string]any{"prompt": ids(limit), "max_tokens": 1}, "prompt")

	status, out := post(t, ts.url+"/completion", map[string]any{"prompt": ids(limit - 1), "n_predict": 5, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(out))
	var r struct {
		Tokens          []int32 `json:"tokens"`
		TokensEvaluated int     `json:"tokens_evaluated"`
	}
	require.NoError(t, json.Unmarshal(out, &r), string(out))
	require.Len(t, r.Tokens, 1, "n_predict 5 cut to the one token that fits: %s", out)
	require.Equal(t, limit-1, r.TokensEvaluated)
	refuses("/completion", map[string]any{"prompt": ids(limit), "n_predict": 1}, "prompt")
}

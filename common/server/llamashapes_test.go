package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests hold the answers to llama-server's shapes, as llama.cpp's own
// server tests read them; where testdata/llama_server_shapes.json recorded
// the shape from a real llama-server, they compare with it.

// recordedShape is the answer testdata/llama_server_shapes.json recorded
// for request name.
func recordedShape(t *testing.T, name string) shapeRecord {
	t.Helper()
	var rec struct {
		Responses map[string]shapeRecord `json:"responses"`
	}
	readJSON(t, "testdata/llama_server_shapes.json", &rec)
	r, ok := rec.Responses[name]
	require.True(t, ok, "no recorded answer %s", name)
	return r
}

// TestContextOverflowIsLlamaServersError: a prompt the context cannot hold
// is llama-server's 400 exceed_context_size_error with n_prompt_tokens and
// n_ctx, on every endpoint, keeping vLLM's code beside it.
func TestContextOverflowIsLlamaServersError(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	long := prompt(300, 1)
	for _, c := range []struct{ path, body string }{
		{"/completion", `{"prompt": ` + mustJSON(long) + `}`},
		{"/completion", `{"prompt": ` + mustJSON(long) + `, "stream": true}`},
		{"/v1/completions", `{"prompt": ` + mustJSON(long) + `}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + strings.Repeat("hello world ", 200) + `"}]}`},
	} {
		status, raw := post(t, ts.url+c.path, c.body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.path, raw)
		var e struct {
			Error struct {
				Type          string `json:"type"`
				Code          string `json:"code"`
				Message       string `json:"message"`
				NPromptTokens int    `json:"n_prompt_tokens"`
				NCtx          int    `json:"n_ctx"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &e), string(raw))
		assert.Equal(t, "exceed_context_size_error", e.Error.Type, c.path)
		assert.Equal(t, "context_length_exceeded", e.Error.Code, c.path)
		assert.Equal(t, 256, e.Error.NCtx, c.path)
		assert.Greater(t, e.Error.NPromptTokens, 256, c.path)
		if c.path != "/v1/chat/completions" {
			assert.Equal(t, 300, e.Error.NPromptTokens, c.path)
		}
		assert.Contains(t, e.Error.Message, "exceeds the available context size", c.path)
	}
}

// TestTruncatedWhenTheContextFills: a /completion that runs into the end
// of the context says truncated, one that stops at its n_predict does not.
func TestTruncatedWhenTheContextFills(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(250, 2)
	full := complete(t, ts.url, map[string]any{"prompt": p, "ignore_eos": true, "temperature": 0})
	assert.Equal(t, 6, full.TokensPredicted, "the context of 256 leaves 6 tokens")
	assert.Equal(t, "limit", full.StopType)
	assert.True(t, full.Truncated, "the generation ran into the end of the context")

	short := complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 3, "ignore_eos": true, "temperature": 0})
	assert.Equal(t, 3, short.TokensPredicted)
	assert.False(t, short.Truncated, "n_predict ended it, not the context")
}

// TestStreamedChatEndsWithAnEmptyDelta: the first chunk names the role
// (content null), the text comes in content chunks none of which is
// empty, and the finishing chunk is "delta": {} with the finish reason, as
// llama-server recorded it.
func TestStreamedChatEndsWithAnEmptyDelta(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	rec := recordedShape(t, "v1_chat_stream")
	recDelta := rec.Last.(map[string]any)["choices"].([]any)[0].(map[string]any)["delta"]
	require.Equal(t, map[string]any{}, recDelta, "llama-server's last chunk has an empty delta")

	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hello"}}, "max_tokens": 8, "temperature": 0, "ignore_eos": true, "stream": true}
	whole := body
	whole["stream"] = false
	status, raw := post(t, ts.url+"/v1/chat/completions", whole)
	require.Equal(t, http.StatusOK, status, string(raw))
	var w chatResponse
	require.NoError(t, json.Unmarshal(raw, &w))

	body["stream"] = true
	evs := stream(t, ts.url+"/v1/chat/completions", body)
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	evs = evs[:len(evs)-1]
	require.GreaterOrEqual(t, len(evs), 3)
	assert.Contains(t, evs[0], `"delta":{"role":"assistant","content":null}`)
	var text string
	for i, ev := range evs[1 : len(evs)-1] {
		assert.NotContains(t, ev, `"finish_reason":"`, "event %d: only the last chunk finishes", i+1)
		var c struct {
			Choices []struct {
				Delta map[string]*string `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev), &c), ev)
		require.Len(t, c.Choices, 1)
		content := c.Choices[0].Delta["content"]
		require.NotNil(t, content, "event %d: %s", i+1, ev)
		assert.NotEmpty(t, *content, "event %d: no empty content chunks", i+1)
		text += *content
	}
	assert.Equal(t, *w.Choices[0].Message.Content, text, "the text is all in the content chunks")

	var last map[string]any
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-1]), &last))
	choice := last["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, recDelta, choice["delta"], "the finishing chunk: %s", evs[len(evs)-1])
	assert.Equal(t, "length", choice["finish_reason"])
	assert.Contains(t, last, "timings")
}

// TestPromptStringObjects: llama-server's {"prompt_string": ...} prompt is
// its text, alone or in an array of prompts; multimodal_data is refused by
// name.
func TestPromptStringObjects(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	base := map[string]any{"n_predict": 3, "temperature": 0, "ignore_eos": true}
	with := func(p any) map[string]any {
		b := map[string]any{"prompt": p}
		for k, v := range base {
			b[k] = v
		}
		return b
	}
	plain := complete(t, ts.url, with("Hello world"))
	obj := complete(t, ts.url, with(map[string]any{"prompt_string": "Hello world"}))
	assert.Equal(t, plain.Tokens, obj.Tokens)
	assert.Equal(t, plain.TokensEvaluated, obj.TokensEvaluated)

	status, raw := post(t, ts.url+"/completion", with([]any{map[string]any{"prompt_string": "Hello world"}, "Hello world"}))
	require.Equal(t, http.StatusOK, status, string(raw))
	var two []llamaResponse
	require.NoError(t, json.Unmarshal(raw, &two), string(raw))
	require.Len(t, two, 2)
	assert.Equal(t, plain.Tokens, two[0].Tokens)
	assert.Equal(t, plain.Tokens, two[1].Tokens)

	status, raw = post(t, ts.url+"/v1/completions", map[string]any{"prompt": map[string]any{"prompt_string": "Hello world"}, "max_tokens": 3, "temperature": 0, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(raw))

	status, raw = post(t, ts.url+"/completion", with(map[string]any{"prompt_string": "Hello", "multimodal_data": []string{"aGk="}}))
	require.Equal(t, http.StatusBadRequest, status, string(raw))
	e := decodeError(t, raw)
	assert.Equal(t, "prompt.multimodal_data", e.Param)
	assert.Contains(t, e.Message, "not supported")
}

// TestPromptArraysOnV1Completions: a list of prompts, as OpenAI's API
// allows, is one choice per prompt and sample, index ordered, each what
// the prompt alone gives; streamed, every choice's chunks say its index.
func TestPromptArraysOnV1Completions(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	prompts := []any{"Hello world", prompt(5, 3), "Good morning"}
	one := func(p any) (string, int) {
		status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 4, "temperature": 0, "ignore_eos": true})
		require.Equal(t, http.StatusOK, status, string(raw))
		var r completionResponse
		require.NoError(t, json.Unmarshal(raw, &r))
		return r.Choices[0].Text, r.Usage.PromptTokens
	}
	var want []string
	promptTokens := 0
	for _, p := range prompts {
		text, n := one(p)
		want = append(want, text, text) // n = 2, greedy: both samples alike
		promptTokens += n
	}
	body := map[string]any{"prompt": prompts, "n": 2, "max_tokens": 4, "temperature": 0, "ignore_eos": true}
	status, raw := post(t, ts.url+"/v1/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var r completionResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	require.Len(t, r.Choices, 6)
	for i, c := range r.Choices {
		assert.Equal(t, i, c.Index)
		assert.Equal(t, want[i], c.Text, "choice %d", i)
	}
	assert.Equal(t, promptTokens, r.Usage.PromptTokens, "every prompt's tokens, once")
	assert.Equal(t, 24, r.Usage.CompletionTokens)

	body["stream"] = true
	evs := stream(t, ts.url+"/v1/completions", body)
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	texts := make([]string, 6)
	finished := make([]bool, 6)
	for _, ev := range evs[:len(evs)-1] {
		var c completionResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &c), ev)
		for _, ch := range c.Choices {
			require.Less(t, ch.Index, 6)
			texts[ch.Index] += ch.Text
			finished[ch.Index] = finished[ch.Index] || ch.FinishReason != nil
		}
	}
	assert.Equal(t, want, texts)
	assert.NotContains(t, finished, false, "every choice finishes")
}

// TestNPredictZeroWarmsTheCache: n_predict 0 (max_tokens 0 on the OpenAI
// endpoints) evaluates the prompt and generates nothing; with a prefix
// cache the next request with that prompt finds it cached.
func TestNPredictZeroWarmsTheCache(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{PrefixCaching: true})
	p := prompt(40, 4)
	warm := complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 0})
	assert.Equal(t, "", warm.Content)
	assert.Empty(t, warm.Tokens)
	assert.Equal(t, 0, warm.TokensPredicted)
	assert.Equal(t, 40, warm.TokensEvaluated)
	assert.Equal(t, "limit", warm.StopType)

	next := complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 1})
	assert.GreaterOrEqual(t, next.Timings.CacheN, 36, "the warm-up cached the prompt's whole blocks")

	q := prompt(40, 5)
	status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": q, "max_tokens": 0})
	require.Equal(t, http.StatusOK, status, string(raw))
	var r completionResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, 0, r.Usage.CompletionTokens)
	assert.Equal(t, "", r.Choices[0].Text)
	again := complete(t, ts.url, map[string]any{"prompt": q, "n_predict": 1})
	assert.GreaterOrEqual(t, again.Timings.CacheN, 36)
}

// TestEmptyPromptAndNegativeTemperature: an empty text prompt is
// answered (the tokenizer's BOS, or nothing), and a negative temperature
// samples greedily, as llama-server takes both.
func TestEmptyPromptAndNegativeTemperature(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	r := complete(t, ts.url, map[string]any{"prompt": "", "n_predict": 2, "ignore_eos": true})
	assert.Equal(t, len(tm.tok.EncodePrompt("")), r.TokensEvaluated)
	status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": "", "max_tokens": 2})
	assert.Equal(t, http.StatusOK, status, string(raw))

	p := prompt(10, 6)
	greedy := complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 6, "temperature": 0, "ignore_eos": true})
	for _, seed := range []int{1, 2} {
		neg := complete(t, ts.url, map[string]any{"prompt": p, "n_predict": 6, "temperature": -1, "seed": seed, "ignore_eos": true})
		assert.Equal(t, greedy.Tokens, neg.Tokens, "seed %d", seed)
	}
	status, raw = post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 6, "temperature": -0.5, "ignore_eos": true, "return_token_ids": true})
	require.Equal(t, http.StatusOK, status, string(raw))
	var c completionResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	assert.Equal(t, greedy.Tokens, c.Choices[0].TokenIDs)
}

// TestReturnProgressOnChat: a streamed chat with return_progress sends
// llama-server's prompt_progress chunks: the prompt's start (the cached
// tokens processed) and its end (all processed).
func TestReturnProgressOnChat(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "This is a test"}}, "max_tokens": 3, "ignore_eos": true, "stream": true, "return_progress": true}
	var progress []promptProgress
	for _, ev := range stream(t, ts.url+"/v1/chat/completions", body) {
		var c chatResponse
		if ev == "[DONE]" || json.Unmarshal([]byte(ev), &c) != nil {
			continue
		}
		if c.Progress != nil {
			progress = append(progress, *c.Progress)
		}
	}
	require.Len(t, progress, 2, "the start and the end of the prompt")
	assert.Greater(t, progress[0].Total, 0)
	assert.Equal(t, progress[0].Cache, progress[0].Processed, "the start: the cached tokens processed")
	assert.Equal(t, progress[0].Total, progress[1].Total)
	assert.Equal(t, progress[1].Total, progress[1].Processed, "the end: all processed")

	body["return_progress"] = false
	for _, ev := range stream(t, ts.url+"/v1/chat/completions", body) {
		assert.NotContains(t, ev, "prompt_progress")
	}
}

// TestIdleSlotNextToken: a slot whose task finished forgets the task's
// budget, as llama-server's does (its test_metrics checks it): n_remain
// -1, n_decoded 0, with or without an n_predict.
func TestIdleSlotNextToken(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, body := range []map[string]any{
		{"prompt": prompt(250, 7), "ignore_eos": true},
		{"prompt": prompt(10, 7), "n_predict": 5, "ignore_eos": true},
	} {
		complete(t, ts.url, body)
		next := slotsOf(t, ts.url)[0].NextToken[0]
		assert.False(t, next.HasNextToken)
		assert.Equal(t, 0, next.NDecoded)
		assert.Equal(t, -1, next.NRemain)
	}
}

// TestSystemFingerprintIsABuild: system_fingerprint and /props' build_info
// are llama-server's b<build>-<commit>.
func TestSystemFingerprintIsABuild(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	build := regexp.MustCompile(`^b\d+-([0-9a-f]{7}|unknown)$`)
	status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": []int{1, 2}, "max_tokens": 1})
	require.Equal(t, http.StatusOK, status, string(raw))
	var c completionResponse
	require.NoError(t, json.Unmarshal(raw, &c))
	assert.Regexp(t, build, c.SystemFingerprint)
	status, raw = post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 1})
	require.Equal(t, http.StatusOK, status, string(raw))
	var ch chatResponse
	require.NoError(t, json.Unmarshal(raw, &ch))
	assert.Regexp(t, build, ch.SystemFingerprint)
	var props map[string]any
	getJSON(t, ts.url+"/props", &props)
	assert.Regexp(t, build, props["build_info"])
}

// TestIgnoreEOSInLogitBias: ignore_eos shows in generation_settings'
// logit_bias as every end-of-generation token with bias -inf (null), the
// shape llama-server recorded.
func TestIgnoreEOSInLogitBias(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	rec := recordedShape(t, "completion_max_tokens")
	recBias := rec.Shape.(map[string]any)["generation_settings"].(map[string]any)["logit_bias"]
	require.Equal(t, []any{map[string]any{"bias": "null", "token": "number"}}, recBias)

	status, raw := post(t, ts.url+"/completion", map[string]any{"prompt": "Hello world", "n_predict": 3, "temperature": 0, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(raw))
	var r struct {
		GenerationSettings struct {
			LogitBias []map[string]any `json:"logit_bias"`
		} `json:"generation_settings"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	var ids []int32
	for id := range ts.h.stopIDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	require.NotEmpty(t, ids, "the test tokenizer has end-of-generation tokens")
	require.Len(t, r.GenerationSettings.LogitBias, len(ids))
	for i, b := range r.GenerationSettings.LogitBias {
		assert.Equal(t, map[string]any{"bias": nil, "token": float64(ids[i])}, b)
		var shape any = shapeOf(any(b))
		assert.Equal(t, recBias.([]any)[0], shape)
	}

	status, raw = post(t, ts.url+"/completion", map[string]any{"prompt": "Hello world", "n_predict": 1})
	require.Equal(t, http.StatusOK, status, string(raw))
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Empty(t, r.GenerationSettings.LogitBias)
}

// TestServerSamplingDefaults: serve's --n-predict, --temp and --seed are
// what a request that names no length, temperature or seed gets, on
// /completion and the OpenAI endpoints.
func TestServerSamplingDefaults(t *testing.T) {
	tm := loadTestModel(t)
	n, temp, seed := 3, 0.9, int64(11)
	ts := startServer(t, tm, engineConfig(false), Options{Defaults: Defaults{NPredict: &n, Temperature: &temp, Seed: &seed}})
	p := prompt(10, 8)
	r := complete(t, ts.url, map[string]any{"prompt": p, "ignore_eos": true})
	assert.Equal(t, 3, r.TokensPredicted)
	assert.Equal(t, 0.9, r.GenerationSettings.Temperature)
	assert.Equal(t, int64(11), r.GenerationSettings.Seed)
	again := complete(t, ts.url, map[string]any{"prompt": p, "ignore_eos": true})
	assert.Equal(t, r.Tokens, again.Tokens, "the same default seed, the same sample")
	asked := complete(t, ts.url, map[string]any{"prompt": p, "ignore_eos": true, "n_predict": 5, "temperature": 0})
	assert.Equal(t, 5, asked.TokensPredicted, "the request's own length wins")

	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		body := map[string]any{"prompt": p, "ignore_eos": true, "return_token_ids": true}
		if path != "/v1/completions" {
			body = map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "ignore_eos": true}
		}
		status, raw := post(t, ts.url+path, body)
		require.Equal(t, http.StatusOK, status, string(raw))
		var u struct {
			Usage usage `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(raw, &u))
		assert.Equal(t, 3, u.Usage.CompletionTokens, path)
	}
}

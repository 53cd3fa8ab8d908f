package server

import (
	"encoding/json"
	"maps"
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

// TestUnusedSlotHasNoTask: a slot no request has run in shows only id,
// n_ctx, speculative and is_processing, as llama-server's; its task's
// fields (params, prompt, next_token, ...) appear after the first request.
func TestUnusedSlotHasNoTask(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{Slots: 2})
	keys := func() []map[string]json.RawMessage {
		var s []map[string]json.RawMessage
		getJSON(t, ts.url+"/slots", &s)
		require.Len(t, s, 2)
		return s
	}
	for _, s := range keys() {
		assert.ElementsMatch(t, []string{"id", "n_ctx", "speculative", "is_processing"}, slices.Collect(maps.Keys(s)))
	}
	complete(t, ts.url, map[string]any{"prompt": prompt(10, 7), "n_predict": 2, "id_slot": 1})
	s := keys()
	assert.NotContains(t, s[0], "params", "slot 0 still unused")
	for _, k := range []string{"id_task", "params", "prompt", "next_token", "n_prompt_tokens"} {
		assert.Contains(t, s[1], k, "slot 1 ran a request")
	}
}

// TestTimingsPerTokenOnEveryEvent: with timings_per_token every event of a
// stream carries the timings so far, the progress reports included (not a
// chat's role chunk), as llama-server's: the first report before any prompt token is computed
// (all zero), then times that never go backwards and are never negative.
// Without it, a token's event has none but a sample's last.
func TestTimingsPerTokenOnEveryEvent(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	chat := []map[string]string{{"role": "user", "content": "the quick brown fox jumps over the lazy dog"}}
	for _, c := range []struct {
		route string
		body  map[string]any
	}{
		{"/completion", map[string]any{"prompt": prompt(40, 3), "n_predict": 4, "ignore_eos": true}},
		{"/v1/chat/completions", map[string]any{"messages": chat, "max_tokens": 4, "ignore_eos": true}},
		{"/v1/completions", map[string]any{"prompt": prompt(40, 3), "max_tokens": 4, "ignore_eos": true}},
	} {
		c.body["stream"], c.body["return_progress"], c.body["timings_per_token"] = true, c.route != "/v1/completions", true
		var timings []llamaTimings
		progress := 0
		for _, ev := range stream(t, ts.url+c.route, c.body) {
			if ev == "[DONE]" {
				continue
			}
			var e struct {
				Timings  *llamaTimings   `json:"timings"`
				Progress *promptProgress `json:"prompt_progress"`
				Choices  []chatChoice    `json:"choices"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev), &e), ev)
			if len(e.Choices) == 1 && e.Choices[0].Delta != nil && e.Choices[0].Delta.Role != "" {
				assert.Nil(t, e.Timings, "a chat's role chunk has none, as llama-server's: %s", ev)
				continue
			}
			require.NotNil(t, e.Timings, "%s: every event has timings: %s", c.route, ev)
			if e.Progress != nil {
				progress++
			}
			timings = append(timings, *e.Timings)
		}
		require.NotEmpty(t, timings, c.route)
		if c.route != "/v1/completions" {
			require.Equal(t, 2, progress, c.route)
			assert.Equal(t, llamaTimings{}, timings[0], "%s: the first report comes before the prompt is computed", c.route)
		}
		last := 0.0
		for i, tm := range timings {
			assert.GreaterOrEqual(t, tm.PromptMS, last, "%s: event %d: prompt_ms goes back", c.route, i)
			last = tm.PromptMS
			for _, v := range []float64{tm.PromptMS, tm.PromptPerTokenMS, tm.PromptPerSecond, tm.PredictedMS, tm.PredictedPerTokenMS, tm.PredictedPerSecond} {
				assert.GreaterOrEqual(t, v, 0.0, "%s: event %d", c.route, i)
			}
		}
		assert.Greater(t, last, 0.0, "%s: the prompt took time", c.route)
	}
	evs := stream(t, ts.url+"/completion", map[string]any{"prompt": prompt(40, 3), "n_predict": 3, "ignore_eos": true, "stream": true})
	require.Len(t, evs, 4, "three tokens and the final answer")
	for _, ev := range evs[:2] {
		assert.NotContains(t, ev, `"timings"`, "without timings_per_token, a token's event")
	}
	assert.Contains(t, evs[3], `"timings"`, "the final answer has them always")
}

// TestChatInputTokensCountsWhatChatRuns: /chat/completions/input_tokens
// (and its /v1 path) answers the prompt tokens that the same messages are
// when /v1/chat/completions runs them (its usage.prompt_tokens), without
// generating; a conversation that renders to nothing is a 400, as chat's.
func TestChatInputTokensCountsWhatChatRuns(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	msgs := []map[string]string{{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}}
	status, raw := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 1})
	require.Equal(t, http.StatusOK, status, string(raw))
	var ch chatResponse
	require.NoError(t, json.Unmarshal(raw, &ch))
	require.Greater(t, ch.Usage.PromptTokens, 5)
	for _, route := range []string{"/chat/completions/input_tokens", "/v1/chat/completions/input_tokens"} {
		status, raw := post(t, ts.url+route, map[string]any{"messages": msgs})
		require.Equal(t, http.StatusOK, status, string(raw))
		var got struct {
			InputTokens int    `json:"input_tokens"`
			Object      string `json:"object"`
		}
		require.NoError(t, json.Unmarshal(raw, &got))
		assert.Equal(t, ch.Usage.PromptTokens, got.InputTokens, route)
		assert.Equal(t, "response.input_tokens", got.Object, route)
	}
	status, raw = post(t, ts.url+"/chat/completions/input_tokens", map[string]any{"messages": msgs, "min_p": 0.1})
	assert.Equal(t, http.StatusBadRequest, status, "a chat request's field rules: %s", raw)
	assert.Contains(t, string(raw), "min_p")
}

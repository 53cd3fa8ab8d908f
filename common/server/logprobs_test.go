package server

import (
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/tokenizer"
)

// logSoftmax is ln softmax(logits)[tok], computed here in float64: the
// outside computation the server's logprobs are checked against.
func logSoftmax(logits []float32, tok int32) float64 {
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - float64(logits[tok]))
	}
	return -math.Log(sum)
}

// TestCompletionLogprobs: /v1/completions' logprobs: N gives the legacy
// shape, each greedy token's logprob the log-softmax of the reference
// engine's logits at its position (before temperature: the request's 0.5
// does not change them), its N alternatives with the greedy token first,
// and text offsets that follow the tokens' texts; a stream carries the same
// values chunk by chunk.
func TestCompletionLogprobs(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(9, 5)
	ref := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 5, IgnoreEOS: true, KeepLogits: true})[1]
	body := map[string]any{"prompt": p, "max_tokens": 5, "temperature": 0, "ignore_eos": true, "logprobs": 3}
	status, raw := post(t, ts.url+"/v1/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var r struct {
		Choices []struct {
			Text     string
			Logprobs *completionLogprobs
		}
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	lp := r.Choices[0].Logprobs
	require.NotNil(t, lp, string(raw))
	require.Len(t, lp.Tokens, 5)
	require.Len(t, lp.TokenLogprobs, 5)
	require.Len(t, lp.TopLogprobs, 5)
	require.Len(t, lp.TextOffset, 5)
	offset := 0
	for i, tok := range ref.Tokens {
		text := string(tm.tok.Piece(tok)[:completePrefix(tm.tok.Piece(tok))])
		assert.Equal(t, text, lp.Tokens[i], "token %d", i)
		assert.InDelta(t, logSoftmax(ref.Logits[i], tok), lp.TokenLogprobs[i], 1e-4, "token %d: the log-softmax of the logits", i)
		assert.LessOrEqual(t, len(lp.TopLogprobs[i]), 3)
		assert.InDelta(t, lp.TokenLogprobs[i], lp.TopLogprobs[i][text], 1e-9, "token %d: greedy is the most likely alternative", i)
		assert.Equal(t, offset, lp.TextOffset[i], "token %d", i)
		offset += len(text)
	}

	// Sampled at temperature 0.5 with a seed, the values stay the raw ones.
	body["temperature"], body["seed"] = 0.5, 3
	status, raw = post(t, ts.url+"/v1/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var hot struct {
		Choices []struct {
			TokenIDs []int32 `json:"token_ids"`
			Logprobs *completionLogprobs
		}
	}
	require.NoError(t, json.Unmarshal(raw, &hot))
	sampled := hot.Choices[0].Logprobs
	require.Len(t, sampled.TokenLogprobs, 5)
	assert.InDelta(t, logSoftmax(ref.Logits[0], ref.Tokens[0]), sampled.TopLogprobs[0][lp.Tokens[0]], 1e-4, "the first position's alternatives are the raw distribution's")

	body["temperature"], body["stream"] = 0, true
	delete(body, "seed")
	var got []float64
	var offsets []int
	for _, ev := range stream(t, ts.url+"/v1/completions", body) {
		if ev == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct{ Logprobs *completionLogprobs }
		}
		require.NoError(t, json.Unmarshal([]byte(ev), &c), ev)
		for _, ch := range c.Choices {
			require.NotNil(t, ch.Logprobs, ev)
			got = append(got, ch.Logprobs.TokenLogprobs...)
			offsets = append(offsets, ch.Logprobs.TextOffset...)
		}
	}
	assert.Equal(t, lp.TokenLogprobs, got, "the stream's logprobs are the whole answer's")
	assert.Equal(t, lp.TextOffset, offsets, "offsets run on across chunks")

	for _, v := range []any{nil, false, engine.MaxTopProbs + 1, -1, "3", 1.5} {
		body := map[string]any{"prompt": p, "max_tokens": 1, "logprobs": v}
		status, raw := post(t, ts.url+"/v1/completions", body)
		if v == nil || v == false {
			require.Equal(t, http.StatusOK, status, string(raw))
			assert.Contains(t, string(raw), `"logprobs":null`)
			continue
		}
		assert.Equal(t, http.StatusBadRequest, status, "logprobs %v: %s", v, raw)
	}
}

// TestChatLogprobs: chat's logprobs: true with top_logprobs N gives
// choices[].logprobs.content[], one entry per token with its text, bytes,
// logprob (the log-softmax of the reference logits) and N alternatives;
// streamed, the chunks carry the same entries; top_logprobs without
// logprobs is refused.
func TestChatLogprobs(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	msgs := []tokenizer.Message{{Role: "user", Content: "Hello there"}}
	rendered, err := tm.tok.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	ref := reference(t, tm, engine.Request{ID: 1, Prompt: tm.tok.Encode(rendered), MaxTokens: 4, IgnoreEOS: true, KeepLogits: true})[1]
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hello there"}},
		"max_tokens": 4, "temperature": 0, "ignore_eos": true, "logprobs": true, "top_logprobs": 2}
	status, raw := post(t, ts.url+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var r chatResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	lp := r.Choices[0].Logprobs
	require.NotNil(t, lp, string(raw))
	require.Len(t, lp.Content, 4)
	for i, tok := range ref.Tokens {
		c := lp.Content[i]
		piece := tm.tok.Piece(tok)
		assert.Equal(t, string(piece[:completePrefix(piece)]), c.Token, "token %d", i)
		require.Len(t, c.Bytes, len(piece))
		for j := range piece {
			assert.Equal(t, int(piece[j]), c.Bytes[j])
		}
		assert.InDelta(t, logSoftmax(ref.Logits[i], tok), c.Logprob, 1e-4, "token %d", i)
		require.Len(t, c.TopLogprobs, 2)
		assert.Equal(t, c.Logprob, c.TopLogprobs[0].Logprob, "token %d: greedy is the first alternative", i)
		assert.GreaterOrEqual(t, c.TopLogprobs[0].Logprob, c.TopLogprobs[1].Logprob)
	}
	assert.Contains(t, string(raw), `"refusal":null`)

	body["stream"] = true
	var streamed []chatTokenLogprob
	for _, ev := range stream(t, ts.url+"/v1/chat/completions", body) {
		if ev == "[DONE]" {
			continue
		}
		var c chatResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &c), ev)
		for _, ch := range c.Choices {
			if ch.Logprobs != nil {
				streamed = append(streamed, ch.Logprobs.Content...)
			}
		}
	}
	assert.Equal(t, lp.Content, streamed)

	delete(body, "stream")
	body["logprobs"] = false
	status, raw = post(t, ts.url+"/v1/chat/completions", body)
	assert.Equal(t, http.StatusBadRequest, status, string(raw))
	assert.Contains(t, string(raw), "top_logprobs")
	body["top_logprobs"] = nil
	status, raw = post(t, ts.url+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Contains(t, string(raw), `"logprobs":null`)
}

// TestCompletionEcho: echo puts the prompt's text before the completion,
// whole or streamed; with logprobs it is refused by name.
func TestCompletionEcho(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	body := map[string]any{"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "ignore_eos": true}
	status, raw := post(t, ts.url+"/v1/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var plain completionResponse
	require.NoError(t, json.Unmarshal(raw, &plain))
	body["echo"] = true
	status, raw = post(t, ts.url+"/v1/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var echoed completionResponse
	require.NoError(t, json.Unmarshal(raw, &echoed))
	assert.Equal(t, "Once upon a time"+plain.Choices[0].Text, echoed.Choices[0].Text)

	body["stream"] = true
	var text strings.Builder
	for _, ev := range stream(t, ts.url+"/v1/completions", body) {
		var c completionResponse
		if ev != "[DONE]" && json.Unmarshal([]byte(ev), &c) == nil && len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Text)
		}
	}
	assert.Equal(t, echoed.Choices[0].Text, text.String())

	delete(body, "stream")
	body["logprobs"] = 1
	status, raw = post(t, ts.url+"/v1/completions", body)
	assert.Equal(t, http.StatusBadRequest, status, string(raw))
	assert.Contains(t, string(raw), `"param":"echo"`)
}

// TestLogitBiasOnTheWire: a bias of -100 on the greedy token moves the
// first token elsewhere, +100 on a token forces it at every position, in
// OpenAI's object form and llama-server's pairs, by id or by text; a bias
// out of range or on a token outside the vocabulary is refused.
func TestLogitBiasOnTheWire(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(8, 2)
	ref := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 3, IgnoreEOS: true})[1]
	greedy := ref.Tokens[0]
	ids := func(path string, extra map[string]any) []int32 {
		body := map[string]any{"prompt": p, "max_tokens": 3, "n_predict": 3, "temperature": 0, "ignore_eos": true, "return_token_ids": true}
		if path == "/completion" {
			delete(body, "max_tokens")
			delete(body, "return_token_ids")
		} else {
			delete(body, "n_predict")
		}
		for k, v := range extra {
			body[k] = v
		}
		status, raw := post(t, ts.url+path, body)
		require.Equal(t, http.StatusOK, status, string(raw))
		var r struct {
			Tokens  []int32
			Choices []struct {
				TokenIDs []int32 `json:"token_ids"`
			}
		}
		require.NoError(t, json.Unmarshal(raw, &r))
		if path == "/completion" {
			return r.Tokens
		}
		return r.Choices[0].TokenIDs
	}
	assert.Equal(t, ref.Tokens, ids("/v1/completions", nil))
	banned := ids("/v1/completions", map[string]any{"logit_bias": map[string]float64{strconv.Itoa(int(greedy)): -100}})
	assert.NotEqual(t, greedy, banned[0], "-100 on the greedy token moves it")
	assert.Equal(t, []int32{7, 7, 7}, ids("/v1/completions", map[string]any{"logit_bias": map[string]float64{"7": 100}}))
	assert.Equal(t, []int32{7, 7, 7}, ids("/completion", map[string]any{"logit_bias": [][]any{{7, 100}}}))
	assert.NotEqual(t, greedy, ids("/completion", map[string]any{"logit_bias": [][]any{{greedy, false}}})[0], "false bans the token")

	// A text's bias lands on each token it encodes to, in either form.
	word := tm.tok.Decode([]int32{7})
	of := tm.tok.Encode(word)
	for _, bias := range []any{map[string]float64{word: 100}, [][]any{{word, 100}}} {
		for _, id := range ids("/completion", map[string]any{"logit_bias": bias}) {
			assert.Contains(t, of, id, "%q's tokens %v are forced", word, of)
		}
	}

	for _, bias := range []any{map[string]float64{"7": 101}, map[string]any{"7": "high"}, map[string]float64{"100000": 1}, [][]any{{7}}, [][]any{{true, 1}}} {
		status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 1, "logit_bias": bias})
		assert.Equal(t, http.StatusBadRequest, status, "%v: %s", bias, raw)
		assert.Contains(t, string(raw), "logit", "%v", bias)
	}
}

// TestPostSamplingProbs: /completion's post_sampling_probs reports, as prob
// and top_probs, the distribution the sampler drew from; at the first
// position it is the softmax of the reference logits at the request's
// temperature, cut to top-p's nucleus and renormalised, computed here.
func TestPostSamplingProbs(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(7, 4)
	ref := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 1, KeepLogits: true})[1]
	const temp, topP = 0.7, 0.5
	status, raw := post(t, ts.url+"/completion", map[string]any{"prompt": p, "n_predict": 3, "ignore_eos": true, "seed": 5,
		"temperature": temp, "top_p": topP, "n_probs": 10, "post_sampling_probs": true})
	require.Equal(t, http.StatusOK, status, string(raw))
	var r struct {
		Probs []struct {
			ID   int32
			Prob float64
			Top  []struct {
				ID   int32
				Prob float64
			} `json:"top_probs"`
			Other *float64 `json:"logprob"`
		} `json:"completion_probabilities"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	require.Len(t, r.Probs, 3)
	for i, tp := range r.Probs {
		assert.Nil(t, tp.Other, "token %d: prob, not logprob", i)
		assert.Greater(t, tp.Prob, 0.0, "token %d was drawn from the nucleus", i)
		require.NotEmpty(t, tp.Top)
		for _, a := range tp.Top {
			assert.Greater(t, a.Prob, 0.0)
		}
	}

	// The outside computation for position 0.
	l := ref.Logits[0]
	type c struct {
		id int32
		w  float64
	}
	var cs []c
	var sum float64
	for i, x := range l {
		cs = append(cs, c{int32(i), math.Exp(float64(x) / temp)})
		sum += cs[i].w
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].w > cs[b].w })
	keep, cum := len(cs), 0.0
	for i := range cs {
		if cum += cs[i].w / sum; cum >= topP {
			keep = i + 1
			break
		}
	}
	var kept float64
	for _, x := range cs[:keep] {
		kept += x.w
	}
	first := r.Probs[0]
	require.Len(t, first.Top, min(keep, 10))
	for j, a := range first.Top {
		assert.Equal(t, cs[j].id, a.ID, "rank %d", j)
		assert.InDelta(t, cs[j].w/kept, a.Prob, 1e-5, "rank %d", j)
	}
}

// TestLogitBiasInGenerationSettings: /completion's generation_settings
// shows the request's logit_bias as llama-server does, a ban as null.
func TestLogitBiasInGenerationSettings(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	status, raw := post(t, ts.url+"/completion", map[string]any{"prompt": []int{1, 2, 3}, "n_predict": 1, "logit_bias": [][]any{{9, false}, {7, 2.5}}})
	require.Equal(t, http.StatusOK, status, string(raw))
	var r struct {
		GenerationSettings struct {
			LogitBias []map[string]any `json:"logit_bias"`
		} `json:"generation_settings"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, []map[string]any{{"bias": nil, "token": 9.0}, {"bias": 2.5, "token": 7.0}}, r.GenerationSettings.LogitBias)
}

// TestTopKOnTheWire: top_k 1 makes a hot, seeded request greedy on every
// generation endpoint, and /completion's generation_settings shows it;
// without it the same request samples something else.
func TestTopKOnTheWire(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(8, 6)
	greedy := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 6, IgnoreEOS: true})[1].Tokens
	hot := map[string]any{"prompt": p, "temperature": 1.5, "seed": 11, "ignore_eos": true, "top_k": 1}
	llama := func(body map[string]any) llamaResponse {
		body = maps.Clone(body)
		body["n_predict"] = 6
		status, raw := post(t, ts.url+"/completion", body)
		require.Equal(t, http.StatusOK, status, string(raw))
		var r llamaResponse
		require.NoError(t, json.Unmarshal(raw, &r))
		return r
	}
	r := llama(hot)
	assert.Equal(t, greedy, r.Tokens)
	assert.Equal(t, 1, r.GenerationSettings.TopK)
	body := maps.Clone(hot)
	body["max_tokens"], body["return_token_ids"] = 6, true
	status, raw := post(t, ts.url+"/v1/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var c struct {
		Choices []struct {
			TokenIDs []int32 `json:"token_ids"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &c))
	assert.Equal(t, greedy, c.Choices[0].TokenIDs)

	delete(hot, "top_k")
	assert.NotEqual(t, greedy, llama(hot).Tokens, "at temperature 1.5 the seed draws other tokens")
}

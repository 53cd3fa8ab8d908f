package server

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/tokenizer"
)

func TestTokenizeAndDetokenizeRoundTrip(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	text := "the shared prefix héllo"

	status, body := post(t, ts.url+"/tokenize", map[string]any{"content": text})
	require.Equal(t, http.StatusOK, status, string(body))
	var plain struct{ Tokens []int32 }
	require.NoError(t, json.Unmarshal(body, &plain))
	assert.Equal(t, tm.tok.Encode(text), plain.Tokens, "no BOS unless add_special")

	status, body = post(t, ts.url+"/tokenize", map[string]any{"content": text, "add_special": true, "with_pieces": true})
	require.Equal(t, http.StatusOK, status, string(body))
	var pieces struct {
		Tokens []struct {
			ID    int32           `json:"id"`
			Piece json.RawMessage `json:"piece"`
		}
	}
	require.NoError(t, json.Unmarshal(body, &pieces))
	bos, _ := tm.tok.BOS()
	require.Equal(t, bos, pieces.Tokens[0].ID, "add_special puts BOS first")
	var joined []byte
	for _, p := range pieces.Tokens[1:] {
		var s string
		var raw []byte
		if json.Unmarshal(p.Piece, &s) == nil {
			raw = []byte(s)
		} else {
			var nums []int
			require.NoError(t, json.Unmarshal(p.Piece, &nums), "a piece is a string or its bytes")
			for _, n := range nums {
				raw = append(raw, byte(n))
			}
		}
		joined = append(joined, raw...)
	}
	assert.Equal(t, text, string(joined), "the pieces spell the text")

	ids := append([]int32{bos}, plain.Tokens...)
	status, body = post(t, ts.url+"/detokenize", map[string]any{"tokens": ids})
	require.Equal(t, http.StatusOK, status, string(body))
	var detok struct{ Content string }
	require.NoError(t, json.Unmarshal(body, &detok))
	assert.Equal(t, tokenizer.SynthBOS+text, detok.Content, "specials are written out")

	status, body = post(t, ts.url+"/tokenize", map[string]any{"content": []any{"the", 7, " prefix"}})
	require.Equal(t, http.StatusOK, status, string(body))
	require.NoError(t, json.Unmarshal(body, &plain))
	want := append(append(tm.tok.Encode("the"), 7), tm.tok.Encode(" prefix")...)
	assert.Equal(t, want, plain.Tokens, "mixed content: strings tokenized in place, ids kept")
}

func TestApplyTemplateIsTheChatPrompt(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	msgs := []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}}
	status, body := post(t, ts.url+"/apply-template", map[string]any{"messages": msgs})
	require.Equal(t, http.StatusOK, status, string(body))
	var out struct{ Prompt string }
	require.NoError(t, json.Unmarshal(body, &out))
	want, err := tm.tok.ApplyChatTemplate([]tokenizer.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello"}}, true)
	require.NoError(t, err)
	assert.Equal(t, want, out.Prompt)
}

func TestPropsDescribeTheServer(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{Slots: 3, ModelName: "m"})
	var props struct {
		TotalSlots   int    `json:"total_slots"`
		NCtx         int    `json:"n_ctx"`
		ChatTemplate string `json:"chat_template"`
		EOS          string `json:"eos_token"`
		Default      struct {
			NCtx   int                `json:"n_ctx"`
			Params generationSettings `json:"params"`
		} `json:"default_generation_settings"`
	}
	getJSON(t, ts.url+"/props", &props)
	assert.Equal(t, 3, props.TotalSlots)
	assert.Equal(t, ts.es.ContextLimit(), props.NCtx)
	assert.Equal(t, ts.es.ContextLimit(), props.Default.NCtx)
	assert.Equal(t, tm.tok.ChatTemplate(), props.ChatTemplate)
	assert.Equal(t, string(tm.tok.Piece(tm.tok.EOS()[0])), props.EOS, "the eos_token of tokenizer_config.json")
	assert.Equal(t, 0.8, props.Default.Params.Temperature, "llama-server's default sampling")
	for _, path := range []string{"/health", "/v1/health"} {
		var h struct{ Status string }
		getJSON(t, ts.url+path, &h)
		assert.Equal(t, "ok", h.Status, path)
	}
}

// TestNProbsReportsTheModelsDistribution: greedy picks the most probable
// token, so each token's logprob is its first alternative's, and the
// probabilities are those of a full softmax over the reference logits.
func TestNProbsReportsTheModelsDistribution(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(9, 3)
	ref := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 4, IgnoreEOS: true, KeepLogits: true})[1]
	status, body := post(t, ts.url+"/completion", map[string]any{"prompt": p, "n_predict": 4, "temperature": 0, "ignore_eos": true, "n_probs": 3})
	require.Equal(t, http.StatusOK, status, string(body))
	var r llamaResponse
	require.NoError(t, json.Unmarshal(body, &r))
	require.Len(t, r.Probs, 4)
	for i, tp := range r.Probs {
		assert.Equal(t, ref.Tokens[i], tp.ID)
		require.Len(t, tp.Top, 3)
		assert.Equal(t, tp.ID, tp.Top[0].ID)
		assert.Equal(t, tp.Logprob, tp.Top[0].Logprob)
		var sum float64
		for _, l := range ref.Logits[i] {
			sum += math.Exp(float64(l - ref.Logits[i][tp.ID]))
		}
		assert.InDelta(t, -math.Log(sum), tp.Logprob, 1e-4, "token %d: log softmax of the reference logits", i)
	}
	status, body = post(t, ts.url+"/completion", map[string]any{"prompt": p, "n_probs": engine.MaxTopProbs + 1})
	assert.Equal(t, http.StatusBadRequest, status, string(body))
}

// TestCompletionTakesAnArrayOfPrompts: each prompt is its own generation,
// answered in order with its index, as if sent alone.
func TestCompletionTakesAnArrayOfPrompts(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{PrefixCaching: true})
	a, b := prompt(10, 1), prompt(7, 2)
	ref := reference(t, tm, engine.Request{ID: 1, Prompt: a, MaxTokens: 3, IgnoreEOS: true}, engine.Request{ID: 2, Prompt: b, MaxTokens: 3, IgnoreEOS: true})
	body := map[string]any{"prompt": [][]int32{a, b}, "n_predict": 3, "temperature": 0, "ignore_eos": true}
	status, raw := post(t, ts.url+"/completion", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var rs []llamaResponse
	require.NoError(t, json.Unmarshal(raw, &rs))
	require.Len(t, rs, 2)
	for i, want := range []*engine.Result{ref[1], ref[2]} {
		assert.Equal(t, i, rs[i].Index)
		assert.Equal(t, want.Tokens, rs[i].Tokens, "prompt %d", i)
	}

	body["stream"] = true
	got := map[int][]int32{}
	stops := map[int]bool{}
	for _, ev := range stream(t, ts.url+"/completion", body) {
		var r llamaResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &r), ev)
		got[r.Index] = append(got[r.Index], r.Tokens...)
		stops[r.Index] = stops[r.Index] || r.Stop
	}
	assert.Equal(t, map[int][]int32{0: ref[1].Tokens, 1: ref[2].Tokens}, got)
	assert.Equal(t, map[int]bool{0: true, 1: true}, stops, "each prompt's stream ends with its own final event")
}

// TestStreamReportsPromptProgressWhenAsked: return_progress sends, before
// the first token, llama-server's reports: where the prompt started (the
// cached tokens processed) and where it ended (all processed); with a
// prefix cache the start counts the cached blocks.
func TestStreamReportsPromptProgressWhenAsked(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{PrefixCaching: true})
	body := map[string]any{"prompt": prompt(11, 4), "n_predict": 2, "ignore_eos": true, "stream": true, "return_progress": true}
	for _, cached := range []int{0, 8} { // the second time, two whole blocks of 4 are cached
		evs := stream(t, ts.url+"/completion", body)
		var reports []promptProgress
		for i, ev := range evs {
			var e llamaPartial
			require.NoError(t, json.Unmarshal([]byte(ev), &e), ev)
			if e.Progress == nil {
				assert.Len(t, reports, 2, "the reports come first")
				continue
			}
			assert.Empty(t, e.Content, "event %d: a progress event has no text", i)
			reports = append(reports, *e.Progress)
		}
		require.Len(t, reports, 2)
		assert.Equal(t, promptProgress{Total: 11, Cache: cached, Processed: cached}, reports[0], "the start")
		assert.Equal(t, promptProgress{Total: 11, Cache: cached, Processed: 11, TimeMS: reports[1].TimeMS}, reports[1], "the end")
	}
	body["return_progress"] = false
	for _, ev := range stream(t, ts.url+"/completion", body) {
		assert.NotContains(t, ev, "prompt_progress")
	}
}

func TestOpenAIAnswersCarryTimingsAndFingerprint(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	status, body := post(t, ts.url+"/v1/completions", map[string]any{"prompt": prompt(6, 1), "max_tokens": 2, "ignore_eos": true})
	require.Equal(t, http.StatusOK, status, string(body))
	var r completionResponse
	require.NoError(t, json.Unmarshal(body, &r))
	require.NotNil(t, r.Timings)
	assert.Equal(t, 6, r.Timings.PromptN)
	assert.Equal(t, 2, r.Timings.PredictedN)
	assert.NotEmpty(t, r.SystemFingerprint)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := testClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

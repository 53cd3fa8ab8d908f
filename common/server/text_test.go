package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/tokenizer"
)

func TestChatCompletionRendersTheTemplate(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	// Text parts are joined with a blank line, as llama-server joins them.
	msgs := []tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello \n\nthere"}}
	rendered, err := tm.tok.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	p := tm.tok.Encode(rendered)
	want := reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 6, IgnoreEOS: true})[1]
	body := map[string]any{
		"messages":   []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": []map[string]string{{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}}}},
		"max_tokens": 6, "temperature": 0, "ignore_eos": true, "return_token_ids": true,
	}

	status, raw := post(t, ts.url+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var r chatResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, "chat.completion", r.Object)
	require.Len(t, r.Choices, 1)
	assert.Equal(t, "assistant", r.Choices[0].Message.Role)
	assert.Equal(t, streamed(tm, want.Tokens), *r.Choices[0].Message.Content)
	assert.Equal(t, want.Tokens, r.Choices[0].TokenIDs)
	assert.Equal(t, len(p), r.Usage.PromptTokens)

	body["stream"] = true
	body["stream_options"] = map[string]bool{"include_usage": true}
	evs := stream(t, ts.url+"/v1/chat/completions", body)
	require.Equal(t, "[DONE]", evs[len(evs)-1])
	var text string
	for i, ev := range evs[:len(evs)-2] {
		var c chatResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &c), ev)
		assert.Equal(t, "chat.completion.chunk", c.Object)
		require.Len(t, c.Choices, 1)
		require.NotNil(t, c.Choices[0].Delta)
		assert.Equal(t, i == 0, c.Choices[0].Delta.Role == "assistant", "event %d: the role comes in the first delta only", i)
		if i == 0 {
			assert.Contains(t, ev, `"delta":{"role":"assistant","content":null}`, "the first delta has the role and no text")
			continue
		}
		if d := c.Choices[0].Delta.Content; d != nil { // the finishing delta is {}
			text += *d
		}
	}
	assert.Equal(t, streamed(tm, want.Tokens), text)
	var last chatResponse
	require.NoError(t, json.Unmarshal([]byte(evs[len(evs)-2]), &last))
	assert.Equal(t, len(p), last.Usage.PromptTokens)
	assert.Equal(t, 6, last.Usage.CompletionTokens)
}

// TestStopStringsCutTheText takes a piece out of the middle of a greedy
// output and asks again with it as a stop string: the text must end right
// before it, streamed or not, with finish_reason "stop".
func TestStopStringsCutTheText(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	p := prompt(12, 9)
	full := streamed(tm, reference(t, tm, engine.Request{ID: 1, Prompt: p, MaxTokens: 24, IgnoreEOS: true})[1].Tokens)
	runes := []rune(full)
	require.Greater(t, len(runes), 12, "the output must be long enough to cut")
	stop := string(runes[8:11])
	want := full[:strings.Index(full, stop)]

	status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 24, "temperature": 0, "ignore_eos": true, "stop": []string{"never appears \x00", stop}})
	require.Equal(t, http.StatusOK, status, string(raw))
	var r completionResponse
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, want, r.Choices[0].Text)
	assert.Equal(t, "stop", *r.Choices[0].FinishReason)
	assert.Less(t, r.Usage.CompletionTokens, 24, "generation stopped at the stop string")

	evs := stream(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 24, "temperature": 0, "ignore_eos": true, "stop": stop, "stream": true})
	var text string
	for _, ev := range evs[:len(evs)-1] {
		var c completionResponse
		require.NoError(t, json.Unmarshal([]byte(ev), &c))
		text += c.Choices[0].Text
	}
	assert.Equal(t, want, text, "no part of the stop string is streamed")

	status, raw = post(t, ts.url+"/completion", map[string]any{"prompt": p, "n_predict": 24, "temperature": 0, "ignore_eos": true, "stop": []string{stop}})
	require.Equal(t, http.StatusOK, status, string(raw))
	var l llamaResponse
	require.NoError(t, json.Unmarshal(raw, &l))
	assert.Equal(t, want, l.Content)
	assert.Equal(t, "word", l.StopType)
	assert.Equal(t, stop, l.StoppingWord)
}

func TestHoldBackKeepsWhatCouldBecomeAStopString(t *testing.T) {
	cases := []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello wor", []string{"world"}, 6},
		{"hello", []string{"xyz"}, 5},
		{"hello", nil, 5},
		{"ab", []string{"abc", "b!"}, 0},
		{"aé", []string{"é!"}, 1}, // é is two bytes: cut before it, not inside it
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, holdBack(tc.text, tc.stops), "holdBack(%q, %q)", tc.text, tc.stops)
	}
}

func TestModelsHealthAndMetrics(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{ModelName: "tiny", PrefixCaching: true})

	get := func(path string) string {
		resp, err := testClient.Get(ts.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.JSONEq(t, `{"status":"ok"}`, get("/health"))
	var models struct {
		Data []struct {
			ID            string `json:"id"`
			MaxModelLen   int    `json:"max_model_len"`
			PrefixCaching bool   `json:"prefix_caching"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(get("/v1/models")), &models))
	require.Len(t, models.Data, 1)
	assert.Equal(t, "tiny", models.Data[0].ID)
	assert.Equal(t, 256, models.Data[0].MaxModelLen)
	assert.True(t, models.Data[0].PrefixCaching)

	p := prompt(16, 10)
	var misses []map[string]int
	for range 2 {
		status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": p, "max_tokens": 3, "temperature": 0, "ignore_eos": true})
		require.Equal(t, http.StatusOK, status, string(raw))
		var u struct {
			Usage struct {
				PromptTokensDetails struct {
					MissByReason map[string]int `json:"miss_tokens_by_reason"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(raw, &u))
		misses = append(misses, u.Usage.PromptTokensDetails.MissByReason)
	}
	// The first request computed its whole prompt, never seen before; the
	// second missed nothing, and usage leaves the field out.
	assert.Equal(t, []map[string]int{{"cold": 16}, nil}, misses)
	m := get("/metrics")
	for _, line := range []string{
		"kvlab:prompt_tokens_total 32",
		"kvlab:generation_tokens_total 6",
		"kvlab:prefix_cache_queries_total 32",
		"kvlab:prefix_cache_hits_total 16", // the second request found all 4 blocks
		`kvlab:prefix_cache_miss_tokens_total{reason="cold"} 16`,
		`kvlab:prefix_cache_miss_tokens_total{reason="salt"} 0`,
		"kvlab:num_requests_running 0",
		"kvlab:kv_blocks_capacity 512",
		`kvlab:request_success_total{finished_reason="length"} 2`,
		"kvlab:time_to_first_token_seconds_count 2",
		"kvlab:inter_token_latency_seconds_count 4",
	} {
		assert.Contains(t, m, "\n"+line+"\n")
	}
}

package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestBadInputGetsAnOpenAIError sends every kind of bad request the server
// must refuse and checks the status and the error's shape; a good request
// afterwards is served as if nothing had happened.
func TestBadInputGetsAnOpenAIError(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{ModelName: "test", MaxBodyBytes: 4096, StrictModelName: true})
	long := make([]int, 300) // the context is 256
	cases := []struct {
		name   string
		path   string
		body   string
		status int
		param  string
		says   string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt": [1, 2`, 400, "", "malformed JSON"},
		{"empty body", "/v1/completions", ``, 400, "", "empty request body"},
		{"body not UTF-8", "/v1/completions", "{\"prompt\": \"caf\xe9\"}", 400, "", "not UTF-8: a bad byte at offset 15"},
		{"wrong type", "/v1/completions", `{"prompt": [1, 2], "max_tokens": "ten"}`, 400, "max_tokens", "must be an integer"},
		{"prompt of the wrong type", "/v1/completions", `{"prompt": {"a": 1}}`, 400, "prompt", "prompt must be"},
		{"no prompt", "/v1/completions", `{"max_tokens": 3}`, 400, "prompt", "required"},
		{"empty token list", "/v1/completions", `{"prompt": []}`, 400, "prompt", "empty"},
		{"batch of prompts with echo", "/v1/completions", `{"prompt": ["a", "b"], "echo": true}`, 400, "echo", "not supported with several prompts"},
		{"multimodal prompt", "/completion", `{"prompt": {"prompt_string": "a", "multimodal_data": ["x"]}}`, 400, "prompt.multimodal_data", "not supported"},
		{"token out of range", "/v1/completions", `{"prompt": [1, 512]}`, 400, "prompt", "512"},
		{"negative token", "/v1/completions", `{"prompt": [1, -3]}`, 400, "prompt", "out of range"},
		{"prompt over the context", "/v1/completions", `{"prompt": ` + mustJSON(long) + `}`, 400, "prompt", "context"},
		{"max_tokens negative", "/v1/completions", `{"prompt": [1], "max_tokens": -1}`, 400, "max_tokens", "at least 0"},
		{"n zero", "/v1/completions", `{"prompt": [1], "n": 0}`, 400, "n", "n must be in"},
		{"n too large", "/v1/completions", `{"prompt": [1], "n": 65}`, 400, "n", "n must be in"},
		{"temperature", "/v1/completions", `{"prompt": [1], "temperature": 2.5}`, 400, "temperature", "at most 2"},
		{"top_p", "/v1/completions", `{"prompt": [1], "top_p": 0}`, 400, "top_p", "top_p"},
		{"stop of the wrong type", "/v1/completions", `{"prompt": [1], "stop": 5}`, 400, "stop", "stop must be"},
		{"unknown model", "/v1/completions", `{"model": "gpt-9", "prompt": [1]}`, 404, "model", "does not exist"},
		{"chat without messages", "/v1/chat/completions", `{"messages": []}`, 400, "messages", "empty"},
		{"chat with a bad role", "/v1/chat/completions", `{"messages": [{"role": "robot", "content": "hi"}]}`, 400, "messages[0].role", "unknown role"},
		{"chat with an image", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content[0].type", "only text"},
		{"n_predict below -1", "/completion", `{"prompt": [1], "n_predict": -2}`, 400, "n_predict", "n_predict"},
		{"unknown route", "/v1/no-such-endpoint", `{}`, 404, "", "no route"},
		{"body over the limit", "/v1/completions", `{"prompt": "` + strings.Repeat("x", 5000) + `"}`, 413, "", "over the limit"},
		{"body not an object", "/v1/completions", `[1, 2]`, 400, "", "the request body must be a JSON object, have a JSON array"},
		{"token id not an integer", "/v1/completions", `{"prompt": [1, 2.5, 5]}`, 400, "prompt", "token ids must be integers: element 1 of the prompt is 2.5"},
		{"n over --max-n", "/v1/completions", `{"prompt": [1], "n": 17}`, 400, "n", "[1, 16] on this server"},
		{"max_tokens over the context", "/v1/completions", `{"prompt": [1, 2], "max_tokens": 255}`, 400, "max_tokens", "maximum context length is 256 tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, ts.url+tc.path, tc.body)
			assert.Equal(t, tc.status, status, string(body))
			e := decodeError(t, body)
			assert.Equal(t, tc.param, e.Param)
			assert.Contains(t, e.Message, tc.says)
			assert.NotEmpty(t, e.Type)
			assert.NotEmpty(t, e.Code, "every error names its code")
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		resp, err := testClient.Get(ts.url + "/v1/completions")
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, http.MethodPost, resp.Header.Get("Allow"))
	})

	// Nothing above disturbed the engine.
	want := reference(t, tm, engine.Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 4, IgnoreEOS: true})[1]
	status, body := post(t, ts.url+"/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0, "ignore_eos": true, "return_token_ids": true}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var r completionResponse
	require.NoError(t, json.Unmarshal(body, &r))
	assert.Equal(t, want.Tokens, r.Choices[0].TokenIDs)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func decodeError(t testing.TB, body []byte) apiError {
	t.Helper()
	var e struct {
		Error *apiError `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	require.NotNil(t, e.Error, "have %s; want an error object", body)
	return *e.Error
}

// TestFullQueueAnswers429 holds the engine loop so that a submitted request
// waits, and checks that the next one is refused while the queue is full.
func TestFullQueueAnswers429(t *testing.T) {
	tm := loadTestModel(t)
	e, err := engine.New(tm.m, engineConfig(false))
	require.NoError(t, err)
	t.Cleanup(e.Close)                                          // registered first, so it runs after the loop stops
	es := engine.NewServerWith(e, engine.Limits{MaxWaiting: 1}) // its loop is not running yet
	ts := startHandler(t, New(es, Options{Tokenizer: tm.tok}))

	var wg sync.WaitGroup
	wg.Add(1)
	var firstStatus int
	go func() {
		defer wg.Done()
		firstStatus, _ = post(t, ts+"/v1/completions", `{"prompt": [1, 2], "max_tokens": 2}`)
	}()
	eventually(t, func() bool { return es.Snapshot().Inbox == 1 }, "the first request to be queued")
	status, body := post(t, ts+"/v1/completions", `{"prompt": [3, 4], "max_tokens": 2}`)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, "queue_full", decodeError(t, body).Code)

	runLoop(t, es)
	wg.Wait()
	assert.Equal(t, http.StatusOK, firstStatus, "the queued request is served once the loop runs")
}

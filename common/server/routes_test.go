package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLlamaServerAliasRoutes sends each endpoint under llama-server's
// other names of it and gets the endpoint's own answer: /completions is
// llama-server's /completion (its shape, not OpenAI's), /chat/completions
// the chat, /models the listing.
func TestLlamaServerAliasRoutes(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{ModelName: "test"})

	status, body := post(t, ts.url+"/completions", `{"prompt": [1, 2, 3], "n_predict": 2, "ignore_eos": true}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var llama map[string]any
	require.NoError(t, json.Unmarshal(body, &llama))
	assert.Contains(t, llama, "content", "/completions answers in /completion's shape")
	assert.Contains(t, llama, "tokens_predicted")

	status, body = post(t, ts.url+"/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var chat chatResponse
	require.NoError(t, json.Unmarshal(body, &chat))
	assert.Equal(t, "chat.completion", chat.Object)

	resp, err := testClient.Get(ts.url + "/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Len(t, list.Data, 1)
	assert.Equal(t, "test", list.Data[0].ID)
}

// TestLlamaServerEndpointsNotImplementedAre501 checks that llama-server's
// endpoints this server lacks answer as llama-server does with the
// feature off: 501 not_supported_error naming the flag, never 404.
func TestLlamaServerEndpointsNotImplementedAre501(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for path, says := range map[string]string{
		"/embedding": "--embeddings", "/embeddings": "--embeddings", "/v1/embeddings": "--embeddings",
		"/rerank": "--reranking", "/reranking": "--reranking", "/v1/rerank": "--reranking", "/v1/reranking": "--reranking",
		"/infill": "Infill is not supported", "/props": "--props",
	} {
		status, body := post(t, ts.url+path, `{"input": "hi", "query": "q", "documents": ["a"]}`)
		assert.Equal(t, http.StatusNotImplemented, status, "%s: %s", path, body)
		e := decodeError(t, body)
		assert.Equal(t, "not_supported_error", e.Type, path)
		assert.Contains(t, e.Message, says, path)
	}

	resp, err := testClient.Get(ts.url + "/lora-adapters")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var adapters []any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&adapters))
	assert.Empty(t, adapters, "no LoRA adapter is loaded")
	status, body := post(t, ts.url+"/lora-adapters", `[]`)
	assert.Equal(t, http.StatusOK, status, string(body))
	status, body = post(t, ts.url+"/lora-adapters", `[{"id": 0, "scale": 1}]`)
	assert.Equal(t, http.StatusBadRequest, status, string(body))
	assert.Contains(t, decodeError(t, body).Message, "invalid adapter id")
}

// TestModelNameIsServedWhateverItIs checks llama-server's behaviour by
// default: any model name is served, as the OpenAI clients always send
// one of their own; and vLLM's with StrictModelName: a name that is not
// one of the served ones (ModelName, Aliases) is a 404 model_not_found.
func TestModelNameIsServedWhateverItIs(t *testing.T) {
	tm := loadTestModel(t)
	lenient := startServer(t, tm, engineConfig(false), Options{ModelName: "test"})
	strict := startServer(t, tm, engineConfig(false), Options{ModelName: "test", Aliases: []string{"other"}, StrictModelName: true})
	chat := func(model string) string {
		return `{"model": "` + model + `", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`
	}
	for _, path := range []string{"/v1/chat/completions", "/chat/completions"} {
		status, body := post(t, lenient.url+path, chat("gpt-4o-mini"))
		assert.Equal(t, http.StatusOK, status, "%s: %s", path, body)

		status, body = post(t, strict.url+path, chat("gpt-4o-mini"))
		require.Equal(t, http.StatusNotFound, status, "%s: %s", path, body)
		e := decodeError(t, body)
		assert.Equal(t, "model_not_found", e.Code)
		assert.Equal(t, "model", e.Param)
		for _, name := range []string{"test", "other", ""} {
			status, body = post(t, strict.url+path, chat(name))
			assert.Equal(t, http.StatusOK, status, "%s with %q: %s", path, name, body)
		}
	}
	status, body := post(t, lenient.url+"/v1/completions", `{"model": "gpt-3.5-turbo-instruct", "prompt": [1, 2], "max_tokens": 2}`)
	assert.Equal(t, http.StatusOK, status, string(body))
	status, body = post(t, strict.url+"/v1/completions", `{"model": "gpt-3.5-turbo-instruct", "prompt": [1, 2], "max_tokens": 2}`)
	assert.Equal(t, http.StatusNotFound, status, string(body))

	// The aliases are listed, as llama-server lists its --alias names.
	resp, err := testClient.Get(strict.url + "/v1/models")
	require.NoError(t, err)
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID      string   `json:"id"`
			Aliases []string `json:"aliases"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Len(t, list.Data, 1)
	assert.Equal(t, "test", list.Data[0].ID)
	assert.Equal(t, []string{"test", "other"}, list.Data[0].Aliases)
}

// TestSlotsAndMetricsOffAre501 checks Options.NoSlots and NoMetrics: GET
// /slots and /metrics answer llama-server's 501 naming its flag, and
// /props says they are off.
func TestSlotsAndMetricsOffAre501(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{NoSlots: true, NoMetrics: true})
	for path, says := range map[string]string{"/slots": "--slots", "/metrics": "--metrics"} {
		resp, err := testClient.Get(ts.url + path)
		require.NoError(t, err)
		var e struct{ Error apiError }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		assert.Equal(t, http.StatusNotImplemented, resp.StatusCode, path)
		assert.Equal(t, "not_supported_error", e.Error.Type, path)
		assert.True(t, strings.Contains(e.Error.Message, says), "%s: %s", path, e.Error.Message)
	}
	resp, err := testClient.Get(ts.url + "/props")
	require.NoError(t, err)
	defer resp.Body.Close()
	var props map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&props))
	assert.Equal(t, false, props["endpoint_slots"])
	assert.Equal(t, false, props["endpoint_metrics"])

	// On by default.
	on := startServer(t, tm, engineConfig(false), Options{})
	for _, path := range []string{"/slots", "/metrics"} {
		resp, err := testClient.Get(on.url + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

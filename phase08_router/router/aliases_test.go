package router

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLlamaServerAliasesThroughTheRouter: llama-server's other names of
// the endpoints (/completions, /chat/completions, /models) are routed as
// the endpoints themselves, and the endpoints a replica does not
// implement reach it and bring back its 501, not the router's 404 or 503.
// A model name the replicas do not serve is served, as by a replica.
func TestLlamaServerAliasesThroughTheRouter(t *testing.T) {
	tm := loadTestModel(t)
	rep := startRealReplica(t, tm, replicaConfig(4))
	_, url := startRouter(t, Options{Replicas: []string{rep.url}, Policy: NewPrefix(0.5, 0), Tokenizer: tm.tok})

	status, _, body := post(t, url+"/completions", `{"prompt": [1, 2, 3], "n_predict": 2}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var llama map[string]any
	require.NoError(t, json.Unmarshal(body, &llama))
	assert.Contains(t, llama, "tokens_predicted", "/completions is /completion")

	status, _, body = post(t, url+"/chat/completions", `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var chat struct{ Object string }
	require.NoError(t, json.Unmarshal(body, &chat))
	assert.Equal(t, "chat.completion", chat.Object)

	// The alias is routed by its prompt, as the chat itself: the same
	// chat again matches the prefix the first one left.
	status, _, body = post(t, url+"/chat/completions", `{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
	require.Equal(t, http.StatusOK, status, string(body))
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:decisions_total", `reason="prefix-match"`))

	resp, err := testClient.Get(url + "/models")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	for _, path := range []string{"/embeddings", "/v1/embeddings", "/rerank", "/infill"} {
		status, _, body = post(t, url+path, `{"input": "hi"}`)
		assert.Equal(t, http.StatusNotImplemented, status, "%s: %s", path, body)
	}
}

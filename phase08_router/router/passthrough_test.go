package router

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLlamaServerEndpointsPassThrough: the endpoints every replica answers
// alike reach a replica through the router, and a dead replica's share goes
// to the next one up.
func TestLlamaServerEndpointsPassThrough(t *testing.T) {
	tm := loadTestModel(t)
	reps := []*realReplica{startRealReplica(t, tm, replicaConfig(4)), startRealReplica(t, tm, replicaConfig(4))}
	_, url := startRouter(t, Options{Replicas: []string{reps[0].url, reps[1].url}, Policy: NewPrefix(0.5, 0), Tokenizer: tm.tok})

	tokenize := func() ([]int32, int) {
		status, rep, body := post(t, url+"/tokenize", `{"content": "a shared prefix"}`)
		require.Equal(t, http.StatusOK, status, string(body))
		var out struct{ Tokens []int32 }
		require.NoError(t, json.Unmarshal(body, &out))
		return out.Tokens, rep
	}
	toks, rep := tokenize()
	assert.Equal(t, tm.tok.Encode("a shared prefix"), toks)
	assert.Equal(t, 0, rep)

	status, _, body := post(t, url+"/apply-template", `{"messages": [{"role": "user", "content": "hi"}]}`)
	assert.Equal(t, http.StatusOK, status, string(body))
	status, _, body = post(t, url+"/detokenize", `{"tokens": [5, 6]}`)
	assert.Equal(t, http.StatusOK, status, string(body))
	status, _, body = post(t, url+"/chat/completions/input_tokens", `{"messages": [{"role": "user", "content": "hi"}]}`)
	assert.Equal(t, http.StatusOK, status, string(body))
	assert.Contains(t, string(body), `"input_tokens"`)
	for _, path := range []string{"/props", "/v1/health", "/v1/models"} {
		resp, err := testClient.Get(url + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	status, _, body = post(t, url+"/props", `{}`)
	assert.Equal(t, http.StatusNotImplemented, status, "the replica's 501 for setting props: %s", body)
	status, _, body = post(t, url+"/lora-adapters", `[]`)
	assert.Equal(t, http.StatusOK, status, "the replica's answer to an empty adapter list: %s", body)
	resp, err := testClient.Get(url + "/lora-adapters")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "GET /lora-adapters")
	req, err := http.NewRequest(http.MethodDelete, url+"/props", nil)
	require.NoError(t, err)
	resp, err = testClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET, POST", resp.Header.Get("Allow"))
	status, _, body = post(t, url+"/tokenize", `{"content": `)
	assert.Equal(t, http.StatusBadRequest, status, "a replica's 400 is the answer: %s", body)

	reps[0].kill()
	toks, rep = tokenize()
	assert.Equal(t, tm.tok.Encode("a shared prefix"), toks)
	assert.Equal(t, 1, rep, "the dead replica's request goes to the next")
}

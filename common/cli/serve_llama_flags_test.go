package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeRefusesLlamaServerFlagsItCannotHonour: -context-shift, and a
// -cache-ram other than 0 without -prefix-caching (a host-memory tier
// keeps what the prefix cache evicts), stop serve at start with the
// reason, before a model is loaded; -swa-full with -window-free too.
func TestServeRefusesLlamaServerFlagsItCannotHonour(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-context-shift"}, "finish with length"},
		{[]string{"-cache-ram", "8192"}, "-cache-ram needs the prefix cache (-prefix-caching)"},
		{[]string{"-swa-full", "-window-free"}, "contradict"},
		{[]string{"-alias", " , "}, "names no model"},
		{[]string{"-api-key", ","}, "has no key"},
	} {
		err := Serve(context.Background(), cachedVariant, append([]string{"-port", "0", "-model", "/nonexistent"}, tc.args...), nil, &syncBuffer{})
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.says, tc.args)
	}
}

// TestServeLlamaServerFlags starts serve as a llama-server user would:
// -alias with two names, keys from -api-key and -api-key-file, -metrics=false,
// -no-slots, -no-ui, -strict-model-name, the CORS flags, -cache-ram 0 (no host-memory tier),
// and the flags that name what serve does already (-ubatch-size, -swa-full, -no-context-shift).
func TestServeLlamaServerFlags(t *testing.T) {
	dir := smallModel(t, "llama")
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("sk-file\n\n"), 0o600))
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-alias", "second, first,second", "-tags", "chat,fim", "-api-key", "sk-flag",
		"-api-key-file", keys, "-metrics=false", "-no-slots", "-no-ui", "-strict-model-name",
		"-ubatch-size", "32", "-cache-ram", "0", "-swa-full", "-no-context-shift",
		"-cors-origins", "localhost", "-cors-methods", "GET", "-no-cors-credentials")

	send := func(method, path, key, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&b)
		return resp.StatusCode, b
	}
	status, body := send(http.MethodGet, "/v1/models", "", "")
	require.Equal(t, http.StatusUnauthorized, status, "the listing needs a key")
	status, _ = send(http.MethodGet, "/health", "", "")
	require.Equal(t, http.StatusOK, status, "/health is public")
	status, body = send(http.MethodGet, "/v1/models", "sk-flag", "")
	require.Equal(t, http.StatusOK, status)
	var list struct {
		Data []struct {
			ID      string   `json:"id"`
			Aliases []string `json:"aliases"`
			Tags    []string `json:"tags"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	assert.Equal(t, "first", list.Data[0].ID)
	assert.Equal(t, []string{"first", "second"}, list.Data[0].Aliases, "sorted, each once, as llama-server's set")
	assert.Equal(t, []string{"chat", "fim"}, list.Data[0].Tags)

	completion := func(model string) string {
		return `{"model": "` + model + `", "prompt": [1, 2, 3], "max_tokens": 2}`
	}
	status, _ = send(http.MethodPost, "/v1/completions", "", completion("first"))
	assert.Equal(t, http.StatusUnauthorized, status)
	status, _ = send(http.MethodPost, "/v1/completions", "sk-wrong", completion("first"))
	assert.Equal(t, http.StatusUnauthorized, status)
	for _, key := range []string{"sk-flag", "sk-file"} {
		status, body = send(http.MethodPost, "/v1/completions", key, completion("second"))
		assert.Equal(t, http.StatusOK, status, "%s: %s", key, body)
	}
	status, _ = send(http.MethodPost, "/v1/completions", "sk-flag", completion("gpt-4o-mini"))
	assert.Equal(t, http.StatusNotFound, status, "-strict-model-name")
	status, _ = send(http.MethodGet, "/metrics", "sk-flag", "")
	assert.Equal(t, http.StatusNotImplemented, status, "-metrics=false")
	status, _ = send(http.MethodGet, "/slots", "sk-flag", "")
	assert.Equal(t, http.StatusNotImplemented, status, "-no-slots")
	status, _ = send(http.MethodGet, "/", "", "")
	assert.Equal(t, http.StatusNotFound, status, "-no-ui, and / needs no key")

	req, err := http.NewRequest(http.MethodOptions, url+"/completion", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://localhost:5173")
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a preflight needs no key")
	assert.Equal(t, "http://localhost:5173", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "GET", resp.Header.Get("Access-Control-Allow-Methods"))
	assert.Equal(t, "false", resp.Header.Get("Access-Control-Allow-Credentials"))
	stop()
	require.NoError(t, <-done, log.String())
}

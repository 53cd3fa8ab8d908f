package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// do sends a request with the given headers and returns the response
// and its body.
func do(t *testing.T, method, url, body string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// TestAPIKey checks Options.APIKeys as llama-server's --api-key: without
// a key or with a wrong one, 401 in llama-server's shape; with any of the
// keys, as a Bearer token or in X-Api-Key, served; the public endpoints
// (/health, /v1/health) need none, the model listing does.
func TestAPIKey(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{APIKeys: []string{"sk-one", "sk-two"}})
	completion := `{"prompt": [1, 2, 3], "max_tokens": 2}`
	for name, h := range map[string]map[string]string{
		"no key":             nil,
		"wrong key":          {"Authorization": "Bearer sk-three"},
		"a key's prefix":     {"Authorization": "Bearer sk-on"},
		"empty bearer":       {"Authorization": "Bearer "},
		"wrong X-Api-Key":    {"X-Api-Key": "sk-onex"},
		"key in another hdr": {"Api-Key": "sk-one"},
	} {
		resp, body := do(t, http.MethodPost, ts.url+"/v1/completions", completion, h)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", name, body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &e), name)
		assert.Equal(t, "Invalid API Key", e.Error.Message, name)
		assert.Equal(t, "authentication_error", e.Error.Type, name)
		assert.Equal(t, 401, e.Error.Code, name)
	}
	for name, h := range map[string]map[string]string{
		"first key":        {"Authorization": "Bearer sk-one"},
		"second key":       {"Authorization": "Bearer sk-two"},
		"without Bearer":   {"Authorization": "sk-two"},
		"in X-Api-Key":     {"X-Api-Key": "sk-one"},
		"X-Api-Key Bearer": {"X-Api-Key": "Bearer sk-one"},
	} {
		resp, body := do(t, http.MethodPost, ts.url+"/v1/completions", completion, h)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", name, body)
	}
	for _, path := range []string{"/health", "/v1/health"} {
		resp, body := do(t, http.MethodGet, ts.url+path, "", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s is public: %s", path, body)
	}
	for _, path := range []string{"/models", "/v1/models", "/props", "/slots", "/metrics"} {
		resp, _ := do(t, http.MethodGet, ts.url+path, "", nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s needs the key", path)
	}
}

// TestCORS checks CORS as llama-server does it: a preflight OPTIONS, on
// any path and without the API key, gets 200 with its Access-Control-*
// headers; by default every answer allows the Origin the request names;
// Origins "localhost" allows only a local one, a list is sent as it is,
// and without credentials "*" is "*".
func TestCORS(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{APIKeys: []string{"sk-one"}})
	origin := map[string]string{"Origin": "http://example.test", "Access-Control-Request-Method": "POST"}
	for _, path := range []string{"/v1/chat/completions", "/completion", "/anything"} {
		resp, body := do(t, http.MethodOptions, ts.url+path, "", origin)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		assert.Equal(t, "http://example.test", resp.Header.Get("Access-Control-Allow-Origin"), path)
		assert.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"), path)
		assert.Equal(t, "GET, POST, DELETE, OPTIONS", resp.Header.Get("Access-Control-Allow-Methods"), path)
		assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Headers"), path)
		assert.Empty(t, body, path)
	}
	resp, body := do(t, http.MethodPost, ts.url+"/v1/completions", `{"prompt": [1, 2], "max_tokens": 2}`,
		map[string]string{"Origin": "http://example.test", "Authorization": "Bearer sk-one"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Equal(t, "http://example.test", resp.Header.Get("Access-Control-Allow-Origin"))

	local := startServer(t, tm, engineConfig(false), Options{CORS: CORS{Origins: "localhost", Methods: "GET", Headers: "Authorization", NoCredentials: true}})
	for o, allowed := range map[string]bool{"http://localhost:8080": true, "http://127.0.0.1": true, "http://[::1]:3000": true,
		"http://localhost.evil.test": false, "http://evil.test": false} {
		resp, _ := do(t, http.MethodOptions, local.url+"/completion", "", map[string]string{"Origin": o})
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		if allowed {
			assert.Equal(t, o, resp.Header.Get("Access-Control-Allow-Origin"), o)
		} else {
			assert.NotContains(t, resp.Header, "Access-Control-Allow-Origin", o)
		}
		assert.Equal(t, "false", resp.Header.Get("Access-Control-Allow-Credentials"))
		assert.Equal(t, "GET", resp.Header.Get("Access-Control-Allow-Methods"))
		assert.Equal(t, "Authorization", resp.Header.Get("Access-Control-Allow-Headers"))
	}
	for cors, want := range map[CORS]string{{Origins: "https://a.test,https://b.test"}: "https://a.test,https://b.test", {NoCredentials: true}: "*"} {
		s := startServer(t, tm, engineConfig(false), Options{CORS: cors})
		resp, _ := do(t, http.MethodGet, s.url+"/health", "", map[string]string{"Origin": "http://evil.test"})
		assert.Equal(t, want, resp.Header.Get("Access-Control-Allow-Origin"), cors)
	}
}

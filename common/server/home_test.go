package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := testClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestHomePageShowsTheCache: GET / (and /index.html) is an HTML page, as
// llama-server's clients expect at its web UI's address, and it shows the
// prefix cache's hits as the engine counts them: after the same prompt
// twice, its whole blocks found cached the second time. It needs no API
// key; with NoUI it is a 404, as llama-server's --no-ui.
func TestHomePageShowsTheCache(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{PrefixCaching: true, ModelName: "home-model", APIKeys: []string{"sk"}})
	status, page := getPage(t, ts.url+"/")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, page, "<!doctype html>")
	assert.Contains(t, page, "home-model")
	assert.Contains(t, page, "0 of 0 prompt tokens found cached")

	for range 2 {
		body, err := json.Marshal(map[string]any{"prompt": prompt(11, 4), "n_predict": 1})
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, ts.url+"/completion", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer sk")
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	// The engine publishes its counts after the step that finished the
	// request, which may come after the answer left.
	want := "8 of 22 prompt tokens found cached (36.4 %)" // two whole blocks of 4, the second time
	eventually(t, func() bool {
		_, page = getPage(t, ts.url+"/index.html")
		return strings.Contains(page, want)
	}, want)

	off := startServer(t, tm, engineConfig(false), Options{NoUI: true})
	status, _ = getPage(t, off.url+"/")
	assert.Equal(t, http.StatusNotFound, status)
}

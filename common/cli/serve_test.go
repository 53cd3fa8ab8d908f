package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/phase08_prefix/radix"
)

var cachedVariant = Variant{Name: "testcached", Summary: "test", PrefixCache: radix.New}

// syncBuffer is a log both the server and the test touch.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs Serve with args on a free loopback port and returns its
// URL, its stop function (the signal) and its result.
func startServe(t *testing.T, v Variant, args ...string) (url string, stop func(), result <-chan error, log *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log = &syncBuffer{}
	addr := make(chan string, 1)
	res := make(chan error, 1)
	go func() {
		res <- Serve(ctx, v, append([]string{"-port", "0"}, args...), func(a string) { addr <- a }, log)
	}()
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-res:
		t.Fatalf("serve exited: %v\n%s", err, log)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(cancel)
	return url, cancel, res, log
}

func completion(t *testing.T, url string, body string) map[string]any {
	t.Helper()
	resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	return out
}

func cachedTokens(r map[string]any) float64 {
	return r["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
}

func TestServeWithoutPrefixCachingIsTheBaseline(t *testing.T) {
	dir := smallModel(t, "llama")
	body := `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "max_tokens": 3, "temperature": 0, "ignore_eos": true, "return_token_ids": true}`

	plainURL, stopPlain, plainDone, _ := startServe(t, cachedVariant, "-model", dir, "-block-size", "4")
	cachedURL, stopCached, cachedDone, _ := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching")
	for range 2 {
		p, c := completion(t, plainURL, body), completion(t, cachedURL, body)
		assert.Equal(t, p["choices"].([]any)[0].(map[string]any)["token_ids"], c["choices"].([]any)[0].(map[string]any)["token_ids"])
		assert.Zero(t, cachedTokens(p), "no cache without -prefix-caching")
	}
	assert.Equal(t, 10.0, cachedTokens(completion(t, cachedURL, body)), "two whole blocks and the kept tail of two found")
	stopPlain()
	stopCached()
	require.NoError(t, <-plainDone)
	require.NoError(t, <-cachedDone)
}

// TestServeShutdownLetsRequestsFinish signals the server while a stream
// is in flight: the stream completes, and the server exits cleanly with
// every block accounted for.
func TestServeShutdownLetsRequestsFinish(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-prefix-caching", "-shutdown-timeout", "30s")
	resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(
		`{"prompt": [4, 5, 6], "max_tokens": 40, "temperature": 0, "ignore_eos": true, "stream": true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	require.True(t, sc.Scan(), "the first event arrives")
	stop()
	var last string
	chunks := 1
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			last = line
			chunks++
		}
	}
	assert.Equal(t, "data: [DONE]", last, "the stream in flight completes")
	assert.Equal(t, 41, chunks, "40 tokens, then [DONE]")
	require.NoError(t, <-done, log.String())
	assert.Contains(t, log.String(), "audit clean")

	_, err = testClient.Get(url + "/health")
	assert.Error(t, err, "the listener is closed")
}

// TestServeShutdownCancelsWhatOutlivesTheGrace gives in-flight requests
// almost no time: they end with finish_reason "abort" and the server
// still exits cleanly.
func TestServeShutdownCancelsWhatOutlivesTheGrace(t *testing.T) {
	dir := smallModel(t, "llama")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-prefix-caching", "-shutdown-timeout", "1ms", "-max-context", "4096")
	resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(
		`{"prompt": [4, 5, 6], "max_tokens": 3000, "temperature": 0, "ignore_eos": true, "stream": true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	require.True(t, sc.Scan())
	stop()
	var lines []string
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			lines = append(lines, line)
		}
	}
	require.NoError(t, <-done, log.String())
	assert.Contains(t, log.String(), "audit clean")
	require.NotEmpty(t, lines)
	assert.Less(t, len(lines), 3000, "the request did not run to its end")
	assert.Contains(t, strings.Join(lines, "\n"), `"finish_reason":"abort"`)
}

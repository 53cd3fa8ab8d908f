package server

import (
	"bytes"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a log several handlers may write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPanicInAPromptGoroutineIsTheRequests500 injects an index-out-of-range
// panic into the goroutine /completion runs its second prompt on, where
// net/http does not recover and a panic ended the process. The request
// gets a 500 that says what happened, the stack is logged, the panic and
// the failed request are counted, and the server goes on: /health and the
// next /completion are served.
func TestPanicInAPromptGoroutineIsTheRequests500(t *testing.T) {
	tm := loadTestModel(t)
	var log lockedBuffer
	hooks := &testHooks{prompt: func(i int) {
		if i == 1 {
			var slots []int
			_ = slots[i] // index out of range, as an off-by-one makes
		}
	}}
	ts := startServer(t, tm, engineConfig(false), Options{Log: &log, hooks: hooks})

	status, body := post(t, ts.url+"/completion", `{"prompt": [[1, 2, 3], [4, 5, 6]], "n_predict": 2}`)
	require.Equal(t, http.StatusInternalServerError, status, string(body))
	e := decodeError(t, body)
	assert.Equal(t, errPanicCode, e.Code)
	assert.Contains(t, e.Message, "index out of range")
	assert.Contains(t, log.String(), "index out of range")
	assert.Contains(t, log.String(), "goroutine", "the stack is logged")

	status, body = post(t, ts.url+"/completion", `{"prompt": [7, 8], "n_predict": 2}`)
	assert.Equal(t, http.StatusOK, status, string(body))
	var health map[string]string
	getJSON(t, ts.url+"/health", &health)
	assert.Equal(t, "ok", health["status"])
	assert.Equal(t, 1.0, metric(t, ts.url, "kvlab:request_panics_total"))
	assert.Equal(t, 1.0, metric(t, ts.url, `kvlab:request_failure_total{reason="error"}`), "the panicked request is an error, not its cancelled sibling's abort")
}

// TestPanicInAHandlerIsTheRequests500 injects a panic into /tokenize's own
// goroutine, which net/http would recover by dropping the connection
// without an answer: the client gets a JSON 500 instead, the panic is
// counted, and the request's place among -max-text-requests (one here) is
// given back, so the next /tokenize is served.
func TestPanicInAHandlerIsTheRequests500(t *testing.T) {
	tm := loadTestModel(t)
	var log lockedBuffer
	var once sync.Once
	hooks := &testHooks{text: func() { once.Do(func() { panic("injected fault") }) }}
	ts := startServer(t, tm, engineConfig(false), Options{Log: &log, MaxTextRequests: 1, hooks: hooks})

	status, body := post(t, ts.url+"/tokenize", `{"content": "hello"}`)
	require.Equal(t, http.StatusInternalServerError, status, string(body))
	assert.Equal(t, "internal error: injected fault (the server logged it and goes on)", decodeError(t, body).Message)
	assert.Contains(t, log.String(), "injected fault")

	status, body = post(t, ts.url+"/tokenize", `{"content": "hello"}`)
	assert.Equal(t, http.StatusOK, status, string(body))
	assert.Equal(t, 1.0, metric(t, ts.url, "kvlab:request_panics_total"))
}

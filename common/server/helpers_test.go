package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/tokenizer"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// testModel is the small synthetic model (vocabulary 512) with the
// tokenizer files the synthetic writer puts beside it.
type testModel struct {
	m   *model.Model
	tok *tokenizer.Tokenizer
}

func loadTestModel(t testing.TB) testModel {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 5)))
	m, err := model.Load(dir, cpu.New())
	require.NoError(t, err)
	t.Cleanup(m.Close)
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	return testModel{m, tok}
}

// engineConfig is the engine the tests serve: small blocks, the audit on
// after every step, and the radix tree when cached is set.
func engineConfig(cached bool) engine.Config {
	c := engine.DefaultConfig()
	c.BlockSize = 4
	c.NumBlocks = 512
	c.MaxBatchTokens = 64
	c.MaxRunning = 32
	c.MaxContext = 256
	c.Audit = true
	if cached {
		c.PrefixCache = radix.New
	}
	return c
}

// testServer is a Handler on real loopback HTTP with its engine loop.
type testServer struct {
	url  string
	e    *engine.Engine
	es   *engine.Server
	h    *Handler
	stop func() // stops the HTTP server and the loop; idempotent
}

// startServer serves tm with cfg on a loopback port. Cleanup stops it and
// fails the test unless every KV block is accounted for.
func startServer(t *testing.T, tm testModel, cfg engine.Config, opts Options) *testServer {
	t.Helper()
	return startServerWith(t, tm, cfg, engine.Limits{}, opts, nil)
}

// startServerWith is startServer with the engine.Server's limits, and a
// wrapper for the listening socket (nil: none), through which a test can
// shape the server's side of every connection.
func startServerWith(t *testing.T, tm testModel, cfg engine.Config, limits engine.Limits, opts Options, wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	return startServerFor(t, tm, cfg, limits, func(*engine.Engine) Options { return opts }, wrap)
}

// startServerFor is startServerWith with options made from the engine (a
// test that needs its pool, for a CacheFile).
func startServerFor(t *testing.T, tm testModel, cfg engine.Config, limits engine.Limits, optsFor func(*engine.Engine) Options, wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	e, err := engine.New(tm.m, cfg)
	require.NoError(t, err)
	es := engine.NewServerWith(e, limits)
	opts := optsFor(e)
	if opts.Tokenizer == nil {
		opts.Tokenizer = tm.tok
	}
	h := New(es, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { es.Run(ctx); close(done) }()
	hs := httptest.NewUnstartedServer(h)
	if wrap != nil {
		hs.Listener = wrap(hs.Listener)
	}
	hs.Start()
	stopped := false
	ts := &testServer{url: hs.URL, e: e, es: es, h: h}
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		cancel()
		<-done
	}
	t.Cleanup(func() {
		ts.stop()
		require.NoError(t, e.Pool().Audit().Err())
		require.Zero(t, e.Pool().Live(), "sequences still open after the server stopped")
		e.Close()
	})
	return ts
}

// testClient is the client of the tests' requests: one the server never
// answers fails its test within a minute instead of hanging until go
// test's timeout.
var testClient = &http.Client{Timeout: time.Minute}

// post sends body as JSON and returns the status and the response body.
func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case string:
		r = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(buf)
	}
	resp, err := testClient.Post(url, "application/json", r)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// events reads a server-sent event stream and returns each event's data.
func events(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			require.Empty(t, line, "an event must end with a blank line")
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		require.True(t, ok, "have line %q; want data: ...", line)
		out = append(out, data)
		expectBlank = true
	}
	require.NoError(t, sc.Err())
	require.False(t, expectBlank, "stream ended inside an event")
	return out
}

// stream posts body and returns the events of the streamed response.
func stream(t testing.TB, url string, body any) []string {
	t.Helper()
	buf, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := testClient.Post(url, "application/json", bytes.NewReader(buf))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return events(t, resp.Body)
}

// reference runs reqs on a fresh in-process engine without a prefix cache:
// what the server must return.
func reference(t testing.TB, tm testModel, reqs ...engine.Request) map[int]*engine.Result {
	t.Helper()
	e, err := engine.New(tm.m, engineConfig(false))
	require.NoError(t, err)
	defer e.Close()
	res := e.RunAll(reqs)
	for id, r := range res {
		require.NoError(t, r.Err, "reference request %d", id)
	}
	return res
}

// eventually polls cond until it holds or a few seconds pass.
func eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("timed out waiting for " + what))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startHandler serves h on loopback and returns its URL.
func startHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// runLoop runs es's loop until the test ends.
func runLoop(t *testing.T, es *engine.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { es.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// streamed is the text a stream decoder makes of ids, token by token: what
// the server sends (random tokens of the synthetic model often form invalid
// UTF-8, which Decode and a stream may replace differently).
func streamed(tm testModel, ids []int32) string {
	st := tm.tok.NewStream()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(st.Next(id))
	}
	b.WriteString(st.Flush())
	return b.String()
}

package router

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hungReplica is a listener that accepts connections and never answers
// (nor reads): a replica whose process is stuck.
func hungReplica(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestHungReplicaTimesOutIsRetriedAndEjected: replica 0 accepts and never
// answers. With a response timeout of 200ms, each request tried there
// times out and is served by replica 1; after two timeouts in a row
// (EjectAfter 2) replica 0 is ejected and the next requests go straight
// to replica 1. A fleet of the hung replica alone answers 504
// replica_timeout, and its one replica is never ejected.
func TestHungReplicaTimesOutIsRetriedAndEjected(t *testing.T) {
	hung := hungReplica(t)
	live := newFakeReplica(t, 0)
	rt, url := startRouter(t, Options{Replicas: []string{hung, live.srv.URL}, Policy: NewRoundRobin(),
		ResponseTimeout: 200 * time.Millisecond, EjectAfter: 2, EjectTime: time.Minute})

	for k := range 4 {
		status, rep, raw := post(t, url+"/v1/completions", `{"prompt":[1,2,3],"max_tokens":1}`)
		require.Equal(t, http.StatusOK, status, "request %d: %s", k, raw)
		assert.Equal(t, 1, rep)
	}
	assert.Len(t, live.received(), 4)
	assert.Equal(t, 2.0, metricValue(t, url, "kvlab_router:replica_failures_total", `reason="response_timeout",replica="0"`))
	assert.Equal(t, 2.0, metricValue(t, url, "kvlab_router:retries_total", ""))
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:ejections_total", `replica="0"`))
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:replica_ejected", `replica="0"`))
	assert.Equal(t, []bool{true, false}, rt.Ejected())
	assert.Equal(t, []bool{true, true}, rt.Up(), "a timeout does not take the replica down: it is ejected")

	rt1, url1 := startRouter(t, Options{Replicas: []string{hung}, Policy: NewRoundRobin(), ResponseTimeout: 200 * time.Millisecond, EjectAfter: 1})
	for range 2 {
		status, _, raw := post(t, url1+"/v1/completions", `{"prompt":[1,2,3]}`)
		assert.Equal(t, http.StatusGatewayTimeout, status, string(raw))
		assert.Contains(t, string(raw), `"code":"replica_timeout"`)
	}
	assert.Equal(t, []bool{false}, rt1.Ejected(), "the last replica is never ejected")
}

// TestFailingReplicaIsEjectedThoughItsHealthSaysOK: replica 0 answers 500
// to every completion while its /health answers 200. No client sees a
// 500: each is retried on replica 1. Two failures in a row eject replica
// 0; a health check that passes does not bring it back; when the ejection
// runs out it is tried again, and failing again it is ejected for twice as
// long. Once it answers, its ejections are forgotten.
func TestFailingReplicaIsEjectedThoughItsHealthSaysOK(t *testing.T) {
	var sick atomic.Bool
	sick.Store(true)
	var hits atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		if sick.Load() {
			http.Error(w, `{"error":{"message":"engine failed"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"index":0,"text":"x"}],"usage":{"prompt_tokens":3}}`))
	}))
	t.Cleanup(bad.Close)
	good := newFakeReplica(t, 0)
	const ejectTime = 300 * time.Millisecond
	rt, url := startRouter(t, Options{Replicas: []string{bad.URL, good.srv.URL}, Policy: NewRoundRobin(),
		EjectAfter: 2, EjectTime: ejectTime, MaxEjectTime: time.Hour})
	ask := func() {
		t.Helper()
		status, rep, raw := post(t, url+"/v1/completions", `{"prompt":[1,2,3]}`)
		require.Equal(t, http.StatusOK, status, string(raw))
		require.Equal(t, 1, rep)
	}
	for range 2 {
		ask()
	}
	assert.Equal(t, int64(2), hits.Load())
	assert.Equal(t, 2.0, metricValue(t, url, "kvlab_router:replica_failures_total", `reason="status_5xx",replica="0"`))
	require.Equal(t, []bool{true, false}, rt.Ejected())
	rt.CheckHealth(t.Context())
	assert.Equal(t, []bool{true, false}, rt.Ejected(), "/health alone does not end an ejection")
	for range 3 {
		ask()
	}
	assert.Equal(t, int64(2), hits.Load(), "nothing is sent to an ejected replica")

	require.Eventually(t, func() bool { return !rt.Ejected()[0] }, 10*time.Second, 10*time.Millisecond, "the ejection never ran out")
	for i := 0; !rt.Ejected()[0] && i < 10; i++ {
		ask() // replica 0 is tried again, fails again
	}
	assert.Equal(t, int64(4), hits.Load(), "tried again after its ejection, until two more failures")
	rt.mu.Lock()
	ejections := rt.replicas[0].ejections
	rt.mu.Unlock()
	assert.Equal(t, 2, ejections)
	assert.Equal(t, 2*ejectTime, rt.opts.ejection(ejections), "the second ejection in a row lasts twice as long")
	assert.Equal(t, 2.0, metricValue(t, url, "kvlab_router:ejections_total", `replica="0"`))

	sick.Store(false)
	require.Eventually(t, func() bool { return !rt.Ejected()[0] }, 10*time.Second, 10*time.Millisecond, "the second ejection never ran out")
	served := false
	for i := 0; !served && i < 4; i++ {
		status, rep, raw := post(t, url+"/v1/completions", `{"prompt":[1,2,3]}`)
		require.Equal(t, http.StatusOK, status, string(raw))
		served = rep == 0
	}
	require.True(t, served, "the healed replica serves again")
	rt.mu.Lock()
	assert.Equal(t, 0, rt.replicas[0].ejections, "its first success forgets its ejections")
	rt.mu.Unlock()
}

// TestStalledStreamIsRetriedBeforeItsFirstEventAndAbortedAfter: replica 0
// sends a stream's headers, then nothing: with an idle timeout of 200ms
// the request is retried on replica 1 and the client never sees replica
// 0. Replica 2 sends its headers and one event, then stalls: that event
// reached the client, so the request is not retried; the client gets an
// error event naming the idle timeout, and the stream is counted aborted.
func TestStalledStreamIsRetriedBeforeItsFirstEventAndAbortedAfter(t *testing.T) {
	stall := func(first string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				w.Write([]byte(`{"status":"ok"}`))
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, first)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}))
		t.Cleanup(s.Close)
		return s
	}
	before := stall("")
	live := newFakeReplica(t, 0)
	after := stall("data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n")
	opts := Options{Policy: NewRoundRobin(), IdleTimeout: 200 * time.Millisecond, EjectAfter: -1}

	opts.Replicas = []string{before.URL, live.srv.URL}
	_, url := startRouter(t, opts)
	status, rep, raw := post(t, url+"/v1/completions", `{"prompt":[1,2,3],"stream":true}`)
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Equal(t, 1, rep, "a stream stalled before its first event is retried elsewhere")
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:replica_failures_total", `reason="idle_timeout",replica="0"`))

	opts.Replicas = []string{after.URL, live.srv.URL}
	_, url = startRouter(t, opts)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // only to catch a hang
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(`{"prompt":[1,2,3],"stream":true}`))
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "0", resp.Header.Get(ReplicaHeader))
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			events = append(events, line)
		}
	}
	require.Len(t, events, 2, "the first event, then the error: %q", events)
	assert.Contains(t, events[0], `"text":"a"`)
	assert.Contains(t, events[1], `"code":"replica_failed"`)
	assert.Contains(t, events[1], "idle timeout")
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:aborted_streams_total", ""))
	assert.Equal(t, 0.0, metricValue(t, url, "kvlab_router:retries_total", ""), "a stream that reached the client is never retried")
	assert.Len(t, live.received(), 1, "only the first request reached replica 1")
}

// TestRetriesAreBounded: with Retries 1, a request is tried on at most two
// of three failing replicas, and the client gets 502 naming the last
// replica's answer.
func TestRetriesAreBounded(t *testing.T) {
	var hits atomic.Int64
	var urls []string
	for range 3 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	_, url := startRouter(t, Options{Replicas: urls, Policy: NewRoundRobin(), Retries: 1, EjectAfter: -1})
	status, _, raw := post(t, url+"/v1/completions", `{"prompt":[1]}`)
	assert.Equal(t, http.StatusBadGateway, status)
	assert.Contains(t, string(raw), `"code":"replica_failed"`)
	assert.Contains(t, string(raw), "answered 500")
	assert.Equal(t, int64(2), hits.Load())
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:retries_total", ""))
}

// TestEjectionKeepsWithinMaxEjectPercent: of four replicas answering 500,
// with MaxEjectPercent 50 at most two are ejected at once, however often
// the others fail.
func TestEjectionKeepsWithinMaxEjectPercent(t *testing.T) {
	var urls []string
	for range 4 {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	rt, url := startRouter(t, Options{Replicas: urls, Policy: NewRoundRobin(), EjectAfter: 1, EjectTime: time.Minute, MaxEjectPercent: 50})
	for range 6 {
		status, _, _ := post(t, url+"/v1/completions", `{"prompt":[1]}`)
		require.Equal(t, http.StatusBadGateway, status)
	}
	n := 0
	for _, e := range rt.Ejected() {
		if e {
			n++
		}
	}
	assert.Equal(t, 2, n, "ejected: %v", rt.Ejected())
}

// TestHungReplicasRequestsMoveWhenItsHealthTimesOut: with the default
// response timeout (600 s), a request waiting on a replica that accepts
// and never answers would wait that long. A health check that times out
// on the replica takes it down and moves the request, which nothing of
// had reached the client, to the other replica at once.
func TestHungReplicasRequestsMoveWhenItsHealthTimesOut(t *testing.T) {
	hung := hungReplica(t)
	live := newFakeReplica(t, 0)
	rt, url := startRouter(t, Options{Replicas: []string{hung, live.srv.URL}, Policy: NewRoundRobin(), EjectAfter: -1})
	type result struct {
		status int
		rep    string
		raw    []byte
	}
	done := make(chan result, 1)
	go func() { // no require here: a failed request is reported by the test goroutine
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":[1,2,3]}`))
		if err != nil {
			done <- result{raw: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- result{resp.StatusCode, resp.Header.Get(ReplicaHeader), b}
	}()
	require.Eventually(t, func() bool { return rt.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the request did not wait on the hung replica: %d %s", r.status, r.raw)
	default:
	}
	rt.CheckHealth(t.Context()) // the hung replica's probe times out (2 s)
	assert.Equal(t, []bool{false, true}, rt.Up())
	select {
	case r := <-done:
		require.Equal(t, http.StatusOK, r.status, string(r.raw))
		assert.Equal(t, "1", r.rep)
	case <-time.After(20 * time.Second):
		t.Fatal("the request stayed on the hung replica")
	}
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:replica_failures_total", `reason="hung",replica="0"`))
}

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

// TestStreamIsRelayedEventByEvent: the replica holds its second event back
// until the client has read the first through the router; a router that
// buffered the stream would never deliver the first, and the test would
// time out.
func TestStreamIsRelayedEventByEvent(t *testing.T) {
	next := make(chan struct{})
	rep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\",\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(rep.Close)
	rt, url := startRouter(t, Options{Replicas: []string{rep.URL}, Policy: NewRoundRobin()})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(`{"prompt":[1,2,3],"stream":true}`))
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "0", resp.Header.Get(ReplicaHeader))
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	require.NoError(t, err, "the first event never arrived: the router is holding the stream back")
	assert.Contains(t, first, `"text":"a"`)
	close(next)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.Equal(t, "\ndata: {\"choices\":[{\"index\":0,\"text\":\"b\",\"finish_reason\":\"length\"}]}\n\n"+
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"+
		"data: [DONE]\n\n", string(rest), "the events arrive as the replica wrote them")
	require.Eventually(t, func() bool { return rt.InFlight() == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, ReplicaStats{Requests: 1, PromptTokens: 3}, rt.Stats()[0])
}

// TestRefusedConnectionIsRetriedElsewhere: a replica that is gone before
// the request reaches it is taken out and the request served by another.
func TestRefusedConnectionIsRetriedElsewhere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	live := newFakeReplica(t, 4)
	rt, url := startRouter(t, Options{Replicas: []string{dead, live.srv.URL}, Policy: NewRoundRobin()})

	status, rep, raw := post(t, url+"/v1/completions", `{"prompt":[1,2,3],"max_tokens":1}`)
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Equal(t, 1, rep)
	assert.Equal(t, []bool{false, true}, rt.Up())
	assert.Equal(t, 1.0, metricValue(t, url, "kvlab_router:retries_total", ""))
	assert.Equal(t, 4.0, metricValue(t, url, "kvlab_router:cached_tokens_total", `replica="1"`))
	assert.Len(t, live.received(), 1)

	// With every replica out, the client gets a 503 in the OpenAI shape.
	rt.markDown(1, nil)
	status, _, raw = post(t, url+"/v1/completions", `{"prompt":[1,2,3]}`)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, string(raw), `"code":"no_replica"`)
}

// TestHealthChecksTakeReplicasOutAndBack polls a replica whose /health
// fails for a while.
func TestHealthChecksTakeReplicasOutAndBack(t *testing.T) {
	var sick atomic.Bool
	rep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sick.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(rep.Close)
	other := newFakeReplica(t, 0)
	rt, url := startRouter(t, Options{Replicas: []string{rep.URL, other.srv.URL}, Policy: NewRoundRobin()})

	rt.CheckHealth(t.Context())
	assert.Equal(t, []bool{true, true}, rt.Up())
	sick.Store(true)
	rt.CheckHealth(t.Context())
	assert.Equal(t, []bool{false, true}, rt.Up())
	assert.Equal(t, 0.0, metricValue(t, url, "kvlab_router:replica_up", `replica="0"`))
	// While it is out, nothing is sent to it.
	for range 4 {
		_, r, _ := post(t, url+"/v1/completions", `{"prompt":[1]}`)
		assert.Equal(t, 1, r)
	}
	sick.Store(false)
	rt.CheckHealth(t.Context())
	assert.Equal(t, []bool{true, true}, rt.Up())
}

// TestRouterErrorsAndPassThrough: the router's own errors are in the
// OpenAI shape; a replica's error reaches the client unchanged.
func TestRouterErrorsAndPassThrough(t *testing.T) {
	rep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"message":"prompt is empty","type":"invalid_request_error","param":"prompt","code":null}}`))
	}))
	t.Cleanup(rep.Close)
	_, url := startRouter(t, Options{Replicas: []string{rep.URL}, Policy: NewPrefix(0.5, 0), MaxBodyBytes: 64})

	status, _, raw := post(t, url+"/v1/completions", `{"prompt":""}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, `{"error":{"message":"prompt is empty","type":"invalid_request_error","param":"prompt","code":null}}`, string(raw))

	status, _, raw = post(t, url+"/v1/completions", `{"prompt":"`+strings.Repeat("x", 100)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, string(raw))

	status, _, _ = post(t, url+"/v2/nothing", `{}`)
	assert.Equal(t, http.StatusNotFound, status)

	resp, err := testClient.Get(url + "/v1/completions")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestKilledReplicaLosesNoRequestThatHadNotStarted kills a replica while
// one of its requests is streaming and others wait in its queue. A request
// that was streaming from it may fail (its tokens reached the client; it
// cannot be replayed), and only with an error event after its first token;
// every request that had not streamed a token is served by another
// replica, with exactly the tokens it would have got anyway. More than one
// may be streaming from it: the engine never waits for a reader, so on a
// busy machine it finishes one request and starts the next while the
// router is still relaying the first one's last events.
func TestKilledReplicaLosesNoRequestThatHadNotStarted(t *testing.T) {
	tm := loadTestModel(t)
	// One request running per replica: the others wait in its queue,
	// sent but unanswered, when the replica dies.
	reps := []*realReplica{startRealReplica(t, tm, replicaConfig(1)), startRealReplica(t, tm, replicaConfig(1)), startRealReplica(t, tm, replicaConfig(1))}
	rt, url := startRouter(t, Options{Replicas: []string{reps[0].url, reps[1].url, reps[2].url}, Policy: NewRoundRobin()})

	const n, maxTokens = 12, 96
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = seq(10+17*i, 20)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var killed atomic.Bool
	var once sync.Once
	results := make([]streamResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = stream(ctx, url, completionBody(prompts[i], maxTokens), func(int) {
				rt.mu.Lock()
				queued := rt.replicas[1].load
				rt.mu.Unlock()
				if queued >= 2 {
					once.Do(func() { reps[1].kill(); killed.Store(true) })
				}
			})
		}()
	}
	wg.Wait()
	require.True(t, killed.Load(), "replica 1 never had a request streaming and another waiting")

	failed := 0
	for i, r := range results {
		if r.errMsg != "" {
			failed++
			assert.NotEmpty(t, r.tokens, "request %d failed before its first token: %s", i, r.errMsg)
			assert.Contains(t, r.errMsg, "mid-stream")
			assert.Equal(t, 1, r.replica, "request %d failed on a replica that was not killed", i)
			continue
		}
		require.True(t, r.done, "request %d ended without [DONE]", i)
	}
	t.Logf("replica 1 killed mid-stream: %d of %d requests failed (after their first token), %v retried elsewhere, replicas up %v",
		failed, n, metricValue(t, url, "kvlab_router:retries_total", ""), rt.Up())
	assert.Less(t, failed, n, "the requests waiting on the killed replica were served elsewhere")
	assert.GreaterOrEqual(t, metricValue(t, url, "kvlab_router:retries_total", ""), 1.0, "the waiting requests were retried")
	assert.Equal(t, []bool{true, false, true}, rt.Up())

	// Served elsewhere, a retried request says exactly what it would have.
	for i, r := range results {
		if r.errMsg != "" {
			continue
		}
		ref := stream(ctx, reps[0].url, completionBody(prompts[i], maxTokens), nil)
		require.True(t, ref.done, ref.errMsg)
		assert.Equal(t, ref.tokens, r.tokens, "request %d", i)
	}
}

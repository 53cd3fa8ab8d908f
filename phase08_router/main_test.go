package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/workload"
)

// TestServeRoutesOverTheGivenReplicas runs the serve command in front of
// two recording replicas and checks that requests reach them unchanged and
// that the router's /metrics counts them.
func TestServeRoutesOverTheGivenReplicas(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	replica := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				w.Write([]byte(`{"status":"ok"}`))
				return
			}
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got[name] = append(got[name], string(b))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`))
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := replica("a"), replica("b")
	// The router loads only the model's tokenizer; a small synthetic model
	// keeps the test off the built-in one.
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 5)))

	ctx, cancel := context.WithCancel(t.Context())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	var log bytes.Buffer
	go func() {
		done <- serve(ctx, []string{"-port=0", "-policy=round-robin", "-model=" + dir, "-replica=" + a.URL, "-replica=" + b.URL},
			func(s string) { addr <- s }, &log)
	}()
	var url string
	select {
	case s := <-addr:
		url = "http://" + s
	case err := <-done:
		t.Fatalf("serve returned before listening: %v\n%s", err, log.String())
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	bodies := []string{`{"prompt":[1,2,3]}`, `{"prompt":[4,5,6]}`, `{"prompt":"a text prompt"}`}
	for _, body := range bodies {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	mu.Lock()
	assert.Equal(t, map[string][]string{"a": {bodies[0], bodies[2]}, "b": {bodies[1]}}, got)
	mu.Unlock()

	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(page), `kvlab_router:cached_tokens_total{replica="0"} 4`)
	assert.Contains(t, string(page), `kvlab_router:decisions_total{reason="round-robin"} 3`)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

// TestCheckRowsRefusesDisagreement: the comparison fails when the
// router's sum disagrees with the replicas' counters, or when two policies
// generated different tokens.
func TestCheckRowsRefusesDisagreement(t *testing.T) {
	run := func(name string, out ...int32) *metrics.Run {
		return &metrics.Run{Name: name, Requests: []metrics.RequestRecord{{ID: 0, Output: out}}}
	}
	var w bytes.Buffer
	rows := []Row{{Policy: "round-robin", CachedTokens: 16, ReplicaHits: 16}, {Policy: "prefix", CachedTokens: 48, ReplicaHits: 48}}
	require.NoError(t, checkRows(&w, rows, []*metrics.Run{run("round-robin", 1, 2), run("prefix", 1, 2)}))
	assert.Contains(t, w.String(), "every policy generated exactly the same tokens")

	assert.ErrorContains(t, checkRows(io.Discard, rows, []*metrics.Run{run("round-robin", 1, 2), run("prefix", 1, 3)}), "prefix: request 0 generated [1 3]")
	rows[1].ReplicaHits = 32
	assert.ErrorContains(t, checkRows(io.Discard, rows, nil), "the router summed 48 cached tokens")
}

// TestWriteRowsComparesWithRoundRobin checks the table's derived columns.
func TestWriteRowsComparesWithRoundRobin(t *testing.T) {
	var w bytes.Buffer
	writeRows(&w, []Row{
		{Policy: "round-robin", Requests: 6, PromptTokens: 100, CachedTokens: 20, PerReplica: []int{2, 2, 2}, Imbalance: 1},
		{Policy: "prefix", Requests: 6, PromptTokens: 100, CachedTokens: 60, PerReplica: []int{3, 2, 1}, Imbalance: 1.5},
	}, 80)
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"prefix", "6", "0", "0.0", "0.0", "0.0", "100", "60", "60.0", "75.0", "3.00×", "3", "/", "2", "/", "1", "1.50"}, strings.Fields(lines[2]))
}

// TestRoutingWorkloadBest checks the deterministic numbers of the table in
// docs/phase08_router.md: make phase08-router's workload has 43110 prompt
// tokens, of which at most 37360 can be found cached.
func TestRoutingWorkloadBest(t *testing.T) {
	p := benchParams()
	cfg, err := cli.DefaultModel().Config()
	require.NoError(t, err)
	p.Vocab = cfg.VocabSize
	reqs, err := workload.Routing(p, workload.DefaultSystemPrompts)
	require.NoError(t, err)
	require.Len(t, reqs, 72)
	prompt, best := bestCached(reqs, 16)
	assert.Equal(t, 43110, prompt)
	assert.Equal(t, 37360, best)
}

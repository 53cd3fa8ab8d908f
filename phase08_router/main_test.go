package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
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
		resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	mu.Lock()
	assert.Equal(t, map[string][]string{"a": {bodies[0], bodies[2]}, "b": {bodies[1]}}, got)
	mu.Unlock()

	resp, err := testClient.Get(url + "/metrics")
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
	rows := []Row{
		{Policy: "round-robin", Requests: 6, PromptTokens: 100, CachedTokens: 20, PerReplica: []int{2, 2, 2}, Imbalance: 1},
		{Policy: "prefix", Requests: 6, PromptTokens: 100, CachedTokens: 60, PerReplica: []int{3, 2, 1}, Imbalance: 1.5, Warms: 2},
	}
	var w bytes.Buffer
	writeRows(&w, rows, 80, true)
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"prefix", "6", "0", "0.0", "0.0", "0.0", "100", "60", "60.0", "75.0", "3.00×", "3", "/", "2", "/", "1", "1.50", "2"}, strings.Fields(lines[2]))

	// The default keeps what the comparison is read by, in under 120 columns.
	w.Reset()
	writeRows(&w, rows, 80, false)
	lines = strings.Split(strings.TrimSpace(w.String()), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"prefix", "0", "0.0", "0.0", "60", "60.0", "75.0", "3.00×", "1.50"}, strings.Fields(lines[2]))
	for _, l := range lines {
		assert.LessOrEqual(t, len([]rune(l)), 120, "%q", l)
	}
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

// TestFleetStartsRoutesAndSurvivesAKill builds the phase08_prefix runnable,
// lets the router start two replicas of it as child processes, routes a
// shared prefix to one of them (which reports it cached), then kills that
// process outright: the next request is served by the other replica.
func TestFleetStartsRoutesAndSurvivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a runnable and starts processes")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the replica with")
	}
	binDir := t.TempDir()
	build := exec.Command(goTool, "build", "-o", binDir, "kvlab/phase08_prefix")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 5)))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ff := fleetFlags{n: 2, design: "prefix", binDir: binDir, blocks: 128, blockSize: 4, logDir: t.TempDir(), startWait: time.Minute,
		extra: multiFlag{"-model=" + dir, "-max-context=256"}}
	var log bytes.Buffer
	urls, fleet, err := ff.start(ctx, false, &log)
	require.NoError(t, err, log.String())
	defer fleet.Stop(10 * time.Second)
	require.Len(t, urls, 2)

	pf := policyFlags{threshold: 0.5, modelDir: dir, health: time.Hour}
	tok, err := pf.tokenizer()
	require.NoError(t, err)
	rt, _, err := pf.newRouter(ctx, policySpec{name: "prefix"}, urls, 4, tok, 0)
	require.NoError(t, err)
	url, stop, err := listen(rt)
	require.NoError(t, err)
	defer stop()

	send := func(prompt string) (int, string) {
		body := `{"prompt":[` + prompt + `],"max_tokens":2,"temperature":0,"ignore_eos":true}`
		resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		var rep int
		_, err = fmt.Sscan(resp.Header.Get("X-Kvlab-Replica"), &rep)
		require.NoError(t, err)
		return rep, string(b)
	}
	const system = "10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25"
	home, _ := send(system + ",30,31")
	again, body := send(system + ",40,41")
	assert.Equal(t, home, again, "the shared prefix goes home")
	assert.Contains(t, body, `"cached_tokens":16`)

	fleet.Kill(home)
	other, _ := send(system + ",50,51")
	assert.Equal(t, 1-home, other, "the killed replica's request went to the other")
	assert.Equal(t, []bool{home == 1, home == 0}, rt.Up())
}

// TestPolicySpecs: the policies -policy and -policies accept with slot
// modifiers, and the ones they refuse.
func TestPolicySpecs(t *testing.T) {
	ps, err := parseSpec("prefix+slots+warm")
	require.NoError(t, err)
	assert.Equal(t, policySpec{name: "prefix", slots: true, warm: true}, ps)
	ps, err = parseSpec("round-robin")
	require.NoError(t, err)
	assert.Equal(t, policySpec{name: "round-robin"}, ps)
	for spec, msg := range map[string]string{
		"least-load+slots":  "only prefix routes to slots",
		"prefix+warm":       "+warm needs +slots",
		"prefix+slots+fast": "unknown modifier",
	} {
		_, err := parseSpec(spec)
		assert.ErrorContains(t, err, msg, spec)
	}
	// bench refuses a slot policy without llama-server replicas.
	var out bytes.Buffer
	assert.Equal(t, 1, run([]string{"bench", "-policies", "prefix+slots"}, &out, &out))
	assert.Contains(t, out.String(), "give -llama-cpp")
}

package router

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvevents"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/server"
	"kvlab/common/tokenizer"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// received is one request as a replica got it off the wire.
type received struct {
	Path string
	Body []byte
}

// fakeReplica records the bytes of every request it receives and answers
// completions with a fixed usage: the way to test what the router sends,
// not what it meant to send.
type fakeReplica struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	cached int // reported as cached_tokens / tokens_cached
}

func newFakeReplica(t *testing.T, cached int) *fakeReplica {
	f := &fakeReplica{cached: cached}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeReplica) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		w.Write([]byte(`{"status":"ok"}`))
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.got = append(f.got, received{r.URL.Path, body})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/completion" {
		fmt.Fprintf(w, `{"content":"x","tokens":[7],"stop":true,"tokens_evaluated":10,"tokens_cached":%d}`, f.cached)
		return
	}
	fmt.Fprintf(w, `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":"length"}],"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":%d}}}`, f.cached)
}

func (f *fakeReplica) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

// testModel is a small synthetic model's folder, with its tokenizer.
type testModel struct {
	dir string
	tok *tokenizer.Tokenizer
}

func loadTestModel(t testing.TB) testModel {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 5)))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	return testModel{dir, tok}
}

// replicaConfig is the engine a real test replica runs: blocks of 4
// tokens, the radix tree, the ownership audit after every step.
func replicaConfig(maxRunning int) engine.Config {
	c := engine.DefaultConfig()
	c.BlockSize = 4
	c.NumBlocks = 512
	c.MaxBatchTokens = 64
	c.MaxRunning = maxRunning
	c.MaxContext = 256
	c.Audit = true
	c.PrefixCache = radix.New
	return c
}

// realReplica is a serving engine behind the real HTTP handler on a
// loopback port, which the test can kill as a crash would.
type realReplica struct {
	url  string
	srv  *http.Server
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

func startRealReplica(t *testing.T, tm testModel, cfg engine.Config) *realReplica {
	t.Helper()
	return startReplica(t, tm, cfg, false)
}

// startReplica starts a real replica; with events it also publishes its
// prefix cache's KV events on /v1/kv_events, as serve -kv-events does.
func startReplica(t *testing.T, tm testModel, cfg engine.Config, events bool) *realReplica {
	t.Helper()
	// Each replica loads its own copy of the model, as its own process
	// would: a model's forward buffers belong to one engine.
	m, err := model.Load(tm.dir, cpu.New())
	require.NoError(t, err)
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	es := engine.NewServer(e)
	opts := server.Options{ModelName: "test", Tokenizer: tm.tok, PrefixCaching: true}
	if events {
		opts.KVEvents = server.NewKVEvents(e.Pool().Observe(kvevents.DefaultHashSeed))
	}
	h := server.New(es, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &realReplica{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h}, stop: cancel, done: make(chan struct{})}
	if opts.KVEvents != nil {
		r.srv.RegisterOnShutdown(opts.KVEvents.Close)
		evDone := make(chan struct{})
		go func() { opts.KVEvents.Run(ctx); close(evDone) }()
		t.Cleanup(func() { <-evDone })
	}
	go func() { es.Run(ctx); close(r.done) }()
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.kill(); e.Close(); m.Close() })
	return r
}

// kill drops the listener and every open connection at once and stops the
// engine: what the router sees when a replica's process dies.
func (r *realReplica) kill() {
	r.once.Do(func() {
		r.srv.Close()
		r.stop()
		<-r.done
	})
}

// startRouter serves a router on loopback; health polling is off unless
// the test asks for it.
func startRouter(t *testing.T, opts Options) (*Router, string) {
	t.Helper()
	if opts.HealthInterval == 0 {
		opts.HealthInterval = -1
	}
	rt, err := New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	s := httptest.NewServer(rt)
	t.Cleanup(func() { s.Close(); cancel(); <-done })
	return rt, s.URL
}

// post sends body to url and returns the status, the serving replica's
// index (-1 if none) and the response body.
func post(t *testing.T, url, body string) (int, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	rep := -1
	if v := resp.Header.Get(ReplicaHeader); v != "" {
		fmt.Sscan(v, &rep)
	}
	return resp.StatusCode, rep, b
}

// streamResult is what a client read from one streamed completion.
type streamResult struct {
	replica int
	tokens  []int32
	done    bool   // data: [DONE] arrived
	errMsg  string // an error event's message, or the failure to connect
	cached  int
}

// stream posts a streamed completion and reads it to its end, calling
// onToken after each content chunk.
func stream(ctx context.Context, url, body string, onToken func(n int)) streamResult {
	res := streamResult{replica: -1}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		res.errMsg = err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		res.errMsg = err.Error()
		return res
	}
	defer resp.Body.Close()
	fmt.Sscan(resp.Header.Get(ReplicaHeader), &res.replica)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		res.errMsg = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b)
		return res
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		v, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(v) == "[DONE]" {
			res.done = true
			continue
		}
		var c struct {
			Choices []struct {
				TokenIDs []int32 `json:"token_ids"`
			} `json:"choices"`
			Usage *struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(v, &c) != nil {
			continue
		}
		if c.Error != nil {
			res.errMsg = c.Error.Message
		}
		if c.Usage != nil {
			res.cached = c.Usage.Details.Cached
		}
		for _, ch := range c.Choices {
			res.tokens = append(res.tokens, ch.TokenIDs...)
			if len(ch.TokenIDs) > 0 && onToken != nil {
				onToken(len(res.tokens))
			}
		}
	}
	return res
}

// completionBody is a greedy streamed completion of prompt ids.
func completionBody(prompt []int32, maxTokens int) string {
	b, _ := json.Marshal(map[string]any{
		"prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}, "ignore_eos": true, "return_token_ids": true,
	})
	return string(b)
}

// metricValue reads one sample from a Prometheus text page, summing its
// label sets; labels narrows to samples whose label text contains it.
func metricValue(t *testing.T, url, name, labels string) float64 {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if labels != "" && !strings.Contains(line, labels) {
			continue
		}
		var v float64
		f := strings.Fields(line)
		fmt.Sscan(f[len(f)-1], &v)
		sum += v
	}
	return sum
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
	"kvlab/common/workload"
)

// Prompts whose first token is one of these make the fake misbehave.
const (
	fakeRefuse   = 900 // 400 with an OpenAI error body
	fakeDrop     = 901 // two chunks, then the connection is cut
	fakeStall    = 902 // one chunk, then nothing until the client gives up
	fakeErrEvent = 903 // one chunk, then an error event
	fakeNoDone   = 904 // every chunk, then a clean end of body without [DONE]
)

// fakeServer implements the server's wire contract: POST /v1/completions
// streaming token ids, /health, /v1/models and /metrics. Token k of a
// request is (last prompt token + k) mod 50; half the prompt is reported
// cached.
type fakeServer struct {
	t         *testing.T
	perChunk  int           // tokens per content chunk
	gap       time.Duration // pause before each content chunk
	emptyLast bool          // finish_reason in a chunk of its own, without tokens

	mu       sync.Mutex
	requests int
	prefill  int
}

func (f *fakeServer) tokens(prompt []int32, n int) []int32 {
	out := make([]int32, n)
	for k := range out {
		out[k] = (prompt[len(prompt)-1] + int32(k)) % 50
	}
	return out
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		w.WriteHeader(http.StatusOK)
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	case "/metrics":
		f.mu.Lock()
		defer f.mu.Unlock()
		fmt.Fprintf(w, "# HELP kvlab:prefill_tokens_computed_total x\n# TYPE kvlab:prefill_tokens_computed_total counter\n")
		fmt.Fprintf(w, "kvlab:prefill_tokens_computed_total %d\n", 1000+f.prefill)
		fmt.Fprintf(w, "kvlab:prefix_cache_evictions_total %d\n", 5+2*f.requests)
		fmt.Fprintf(w, "kvlab:kv_block_copies_total{model_name=\"fake\"} %d\n", f.requests)
		fmt.Fprintf(w, "kvlab:kv_blocks_capacity 64\n")
	case "/v1/completions":
		f.complete(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeServer) complete(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Model         string  `json:"model"`
		Prompt        []int32 `json:"prompt"`
		MaxTokens     int     `json:"max_tokens"`
		Temperature   float64 `json:"temperature"`
		Stream        bool    `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		IgnoreEOS      bool `json:"ignore_eos"`
		ReturnTokenIDs bool `json:"return_token_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || len(q.Prompt) == 0 || q.MaxTokens < 1 ||
		!q.Stream || !q.StreamOptions.IncludeUsage || !q.IgnoreEOS || !q.ReturnTokenIDs || q.Temperature != 0 || q.Model != "fake-model" {
		f.t.Errorf("fake server: unexpected request %+v (decode error %v)", q, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if q.Prompt[0] == fakeRefuse {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"prompt is too long","type":"invalid_request_error","param":"prompt","code":null}}`)
		return
	}
	cached := len(q.Prompt) / 2
	f.mu.Lock()
	f.requests++
	f.prefill += len(q.Prompt) - cached
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	chunk := func(ids []int32, finish any) map[string]any {
		c := map[string]any{"index": 0, "text": "", "finish_reason": finish}
		if ids != nil {
			c["token_ids"] = ids
		}
		return map[string]any{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "fake-model", "choices": []any{c}}
	}
	toks := f.tokens(q.Prompt, q.MaxTokens)
	for i, n := 0, 0; i < len(toks); i += f.perChunk {
		ids := toks[i:min(i+f.perChunk, len(toks))]
		select {
		case <-time.After(f.gap):
		case <-r.Context().Done():
			return
		}
		switch {
		case q.Prompt[0] == fakeDrop && n == 2:
			panic(http.ErrAbortHandler) // cuts the connection mid-stream
		case q.Prompt[0] == fakeStall && n == 1:
			<-r.Context().Done()
			return
		case q.Prompt[0] == fakeErrEvent && n == 1:
			send(map[string]any{"error": map[string]any{"message": "engine stopped", "type": "internal_error"}})
			return
		}
		var finish any
		if i+f.perChunk >= len(toks) && !f.emptyLast {
			finish = "length"
		}
		send(chunk(ids, finish))
		n++
	}
	if q.Prompt[0] == fakeNoDone {
		return
	}
	if f.emptyLast {
		send(chunk(nil, "length"))
	}
	send(map[string]any{"id": "cmpl-1", "object": "text_completion", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": len(q.Prompt), "completion_tokens": len(toks), "total_tokens": len(q.Prompt) + len(toks),
			"prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func startFake(t *testing.T, f *fakeServer) *httptest.Server {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

// runHTTP runs reqs against the fake through the workload driver, bounded
// in time whatever the client does.
func runHTTP(t *testing.T, url string, timeout time.Duration, reqs []workload.Request) *metrics.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newHTTPEngine(ctx, url, "fake-model", timeout)
	defer e.Close()
	run, err := workload.Run(e, reqs, workload.RunOptions{Name: "http"})
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "the run was cut short by the test's time limit")
	return run
}

func TestHTTPEngineRecordsTokensCachedAndChunkTimes(t *testing.T) {
	f := &fakeServer{perChunk: 2, gap: 30 * time.Millisecond}
	srv := startFake(t, f)
	reqs := []workload.Request{
		{ID: 7, Prompt: []int32{1, 2, 3, 4}, MaxTokens: 5},
		{ID: 8, Prompt: []int32{5, 6, 7, 8, 9, 10}, MaxTokens: 4, Arrival: 10 * time.Millisecond},
	}
	run := runHTTP(t, srv.URL, 10*time.Second, reqs)

	for i, r := range run.Requests {
		q := reqs[i]
		require.Empty(t, r.Err)
		if diff := cmp.Diff(f.tokens(q.Prompt, q.MaxTokens), r.Output); diff != "" {
			t.Errorf("request %d output (-want +have):\n%s", q.ID, diff)
		}
		assert.Equal(t, q.MaxTokens, r.OutputLen)
		assert.Equal(t, len(q.Prompt)/2, r.CachedTokens, "usage.prompt_tokens_details.cached_tokens")
		require.Len(t, r.TokenTimes, q.MaxTokens)
		assert.Equal(t, r.TokenTimes[0], r.FirstToken)
		assert.Equal(t, r.TokenTimes[len(r.TokenTimes)-1], r.Finish)
		assert.GreaterOrEqual(t, r.FirstToken-r.Arrival, 30*time.Millisecond, "the first chunk is sent after one gap")
		// Tokens of one chunk share its timestamp; chunks are a gap apart.
		for k := 1; k < len(r.TokenTimes); k++ {
			if k%2 == 1 {
				assert.Equal(t, r.TokenTimes[k-1], r.TokenTimes[k], "request %d tokens %d and %d came in one chunk", q.ID, k-1, k)
			} else {
				assert.Greater(t, r.TokenTimes[k]-r.TokenTimes[k-1], 10*time.Millisecond, "request %d: chunks are 30ms apart", q.ID)
			}
		}
	}
	s := run.Summary()
	assert.Equal(t, 0, s.Failed)
	assert.InDelta(t, 5.0/10, s.HitRate, 1e-9)
}

func TestHTTPEngineStampsTokensWhenReadNotWhenCollected(t *testing.T) {
	srv := startFake(t, &fakeServer{perChunk: 1})
	e := newHTTPEngine(context.Background(), srv.URL, "fake-model", 10*time.Second)
	defer e.Close()
	submitted := time.Now()
	require.NoError(t, e.Submit(1, []int32{3}, 3))
	time.Sleep(300 * time.Millisecond) // the stream is long over
	collected := time.Now()

	var evs []workload.Token
	for deadline := time.Now().Add(5 * time.Second); e.Busy() && time.Now().Before(deadline); {
		evs = append(evs, e.Wait(time.Second)...)
	}
	require.Len(t, evs, 3)
	assert.True(t, evs[2].Done)
	for _, ev := range evs {
		assert.True(t, !ev.At.Before(submitted) && ev.At.Before(collected),
			"token stamped %v after submission; collected %v after", ev.At.Sub(submitted), collected.Sub(submitted))
	}
}

func TestHTTPEngineFinishReasonInAChunkOfItsOwn(t *testing.T) {
	srv := startFake(t, &fakeServer{perChunk: 3, emptyLast: true})
	run := runHTTP(t, srv.URL, 10*time.Second, []workload.Request{{ID: 1, Prompt: []int32{4, 4}, MaxTokens: 7}})
	r := run.Requests[0]
	require.Empty(t, r.Err)
	assert.Equal(t, 7, r.OutputLen)
	assert.Equal(t, 1, r.CachedTokens)
}

func TestHTTPEngineFailuresAreRecordedNotFatal(t *testing.T) {
	srv := startFake(t, &fakeServer{perChunk: 1, gap: 5 * time.Millisecond})
	reqs := []workload.Request{
		{ID: 0, Prompt: []int32{1, 2}, MaxTokens: 4},
		{ID: 1, Prompt: []int32{fakeRefuse, 2}, MaxTokens: 4},
		{ID: 2, Prompt: []int32{fakeDrop, 2}, MaxTokens: 6},
		{ID: 3, Prompt: []int32{fakeStall, 2}, MaxTokens: 6},
		{ID: 4, Prompt: []int32{fakeErrEvent, 2}, MaxTokens: 6},
		{ID: 5, Prompt: []int32{fakeNoDone, 2}, MaxTokens: 3},
		{ID: 6, Prompt: []int32{3, 2}, MaxTokens: 4},
	}
	start := time.Now()
	run := runHTTP(t, srv.URL, 500*time.Millisecond, reqs)
	assert.Less(t, time.Since(start), 10*time.Second)

	have := map[int]metrics.RequestRecord{}
	for _, r := range run.Requests {
		have[r.ID] = r
	}
	for _, id := range []int{0, 6} {
		assert.Empty(t, have[id].Err, "request %d is unaffected by the others", id)
		assert.Equal(t, 4, have[id].OutputLen)
	}
	assert.Contains(t, have[1].Err, "HTTP 400")
	assert.Contains(t, have[1].Err, "prompt is too long", "the server's message is kept")
	assert.Equal(t, 0, have[1].OutputLen)

	assert.Contains(t, have[2].Err, "stream broken after 2 tokens")
	assert.Equal(t, 2, have[2].OutputLen, "tokens read before the drop are kept")

	assert.Contains(t, have[3].Err, "request timeout")
	assert.Equal(t, 1, have[3].OutputLen)

	assert.Contains(t, have[4].Err, "engine stopped")
	assert.Contains(t, have[5].Err, "before [DONE]")
	assert.Equal(t, 3, have[5].OutputLen)
	assert.Equal(t, 5, run.Summary().Failed)
}

func TestHTTPEngineServerGone(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	run := runHTTP(t, url, time.Second, []workload.Request{{ID: 1, Prompt: []int32{1}, MaxTokens: 2}})
	assert.NotEmpty(t, run.Requests[0].Err)
}

func TestParsePromText(t *testing.T) {
	text := `# HELP kvlab:x_total A counter.
# TYPE kvlab:x_total counter
kvlab:x_total 12
kvlab:y_total{reason="length"} 3
kvlab:y_total{reason="odd } \" label"} 4 1700000000000

go_gc_duration_seconds{quantile="0.5"} 1.5e-05
`
	have, err := parsePromText(strings.NewReader(text))
	require.NoError(t, err)
	want := map[string]float64{"kvlab:x_total": 12, "kvlab:y_total": 7, "go_gc_duration_seconds": 1.5e-05}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("(-want +have):\n%s", diff)
	}
	_, err = parsePromText(strings.NewReader("kvlab:x{a=\"b\" 1\n"))
	assert.Error(t, err)
	_, err = parsePromText(strings.NewReader("kvlab:x one\n"))
	assert.Error(t, err)
}

func TestBenchHTTPFillsWhatTheMetricsExpose(t *testing.T) {
	srv := startFake(t, &fakeServer{perChunk: 4})
	reqs := []workload.Request{
		{ID: 0, Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8}, MaxTokens: 2},
		{ID: 1, Prompt: []int32{1, 2, 3, 4, 9, 9}, MaxTokens: 2, Arrival: 5 * time.Millisecond},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, na, err := benchHTTP(ctx, httpTarget{url: srv.URL, timeout: 10 * time.Second, blockSize: 4}, "fake", reqs, nil)
	require.NoError(t, err)
	assert.Equal(t, metrics.EngineStats{PrefillTokensComputed: 4 + 3, Evictions: 4, BlockCopies: 2, TotalBlocks: 64, BlockSize: 4}, run.Engine)
	assert.ElementsMatch(t, []string{"peak blocks", "max running", "preempted"}, na)

	var out strings.Builder
	require.NoError(t, reportHTTP(&out, []*metrics.Run{run}, [][]string{na}, reportOptions{what: "t", wide: true}))
	lines := strings.Split(out.String(), "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	header, row := cellSep.Split(lines[0], -1), cellSep.Split(strings.TrimSpace(lines[1]), -1)
	require.Len(t, row, len(header))
	cell := map[string]string{}
	for i, h := range header {
		cell[h] = row[i]
	}
	assert.Equal(t, "n/a", cell["peak blocks"])
	assert.Equal(t, "n/a", cell["preempted"])
	assert.Equal(t, "7", cell["prefill tok"])
	assert.Equal(t, "4", cell["evicted"])
	assert.Equal(t, "50.0", cell["hit %"])
	assert.Contains(t, lines[2], "n/a: not in the server's /metrics")
}

func TestBenchHTTPServerNotUp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, _, err := benchHTTP(context.Background(), httpTarget{url: srv.URL}, "x", nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not up")
}

func TestBenchURLCommand(t *testing.T) {
	srv := startFake(t, &fakeServer{perChunk: 1})
	dir := t.TempDir()
	code, stdout, stderr := run("bench", "-url", srv.URL, "-workload", "prefix_caching", "-requests", "4",
		"-prefix-len", "8", "-suffix-min", "2", "-suffix-max", "3", "-min-tokens", "2", "-max-tokens", "3",
		"-rps", "100", "-vocab", "40", "-quiet", "-json", dir+"/run.json", "-plot", dir+"/ttft.svg")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, srv.URL)
	assert.Contains(t, stdout, "n/a")
	assert.Contains(t, stdout, "TTFT plot:")
	assert.FileExists(t, dir+"/run.json")
}

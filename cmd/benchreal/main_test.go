package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/workload"
)

func TestPlanAlternatesTheServers(t *testing.T) {
	shared, neutral := servingRun{shared: true}, servingRun{}
	got := plan(2, 2, []servingRun{shared, neutral})
	want := []step{
		{0, "single", servingRun{}, 0}, {0, "single", servingRun{}, 1},
		{0, "serving", shared, 0}, {0, "serving", shared, 1}, {0, "serving", neutral, 0}, {0, "serving", neutral, 1},
		{1, "single", servingRun{}, 0}, {1, "single", servingRun{}, 1},
		{1, "serving", shared, 0}, {1, "serving", shared, 1}, {1, "serving", neutral, 0}, {1, "serving", neutral, 1},
	}
	assert.Equal(t, want, got)
	assert.Len(t, plan(3, 1, servingRuns(2)), 15, "one server: its steps alone, the single run and four serving runs a round")
}

func TestMarkdown(t *testing.T) {
	got := markdown([]string{"model", "tok/s"}, [][]string{{"qwen3-0.6b-bf16", "12.3"}, {"a", "1,234"}})
	want := "" +
		"| model           | tok/s |\n" +
		"| --------------- | ----: |\n" +
		"| qwen3-0.6b-bf16 |  12.3 |\n" +
		"| a               | 1,234 |\n"
	assert.Equal(t, want, got)
}

func TestNumbers(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 0.0123: "0.012", 0.5: "0.50", 3.14159: "3.14", 12.34: "12.3", 123.4: "123", 1234.5: "1,235", 1234567: "1,234,567"} {
		assert.Equal(t, want, num(x), x)
	}
	assert.Equal(t, "-1,000", commas(-1000))
	assert.Equal(t, "999", commas(999))
	assert.Equal(t, "2.00 (1.00–3.00)", spread([]float64{3, 1, 2}))
	assert.Equal(t, "2.50", spread([]float64{2.5}))
	assert.Equal(t, "2,427", spread([]float64{2427, 2427.2}), "no range where the two ends print the same")
	assert.Equal(t, "–", spread(nil))
}

func TestMedians(t *testing.T) {
	assert.Equal(t, 2.0, medianF([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, medianF([]float64{4, 1, 2, 3}), "an even count: the mean of the middle two")
	assert.Equal(t, 0.0, medianF(nil))
	assert.Equal(t, 150*time.Millisecond, medianDur([]time.Duration{100 * time.Millisecond, 200 * time.Millisecond}))
	xs := []float64{3, 1, 2}
	medianF(xs)
	assert.Equal(t, []float64{3, 1, 2}, xs, "the samples are left as they are")
}

// The serving run's percentiles are metrics.Summary's (nearest rank): on
// 32 requests p99 is the slowest, p50 the 16th.
func TestServingPercentiles(t *testing.T) {
	var run metrics.Run
	for i := range 32 {
		first := time.Duration(i+1) * time.Second
		run.Requests = append(run.Requests, metrics.RequestRecord{ID: i, OutputLen: 2, TokenTimes: []time.Duration{first, first + time.Duration(i+1)*time.Millisecond},
			FirstToken: first, Finish: first + time.Second})
	}
	run.Wall = 64 * time.Second
	s := run.Summary()
	assert.Equal(t, 16*time.Second, s.TTFT.P50)
	assert.Equal(t, 32*time.Second, s.TTFT.P99)
	assert.Equal(t, 16*time.Millisecond, s.ITL.P50)
	assert.Equal(t, 1.0, s.OutputTokensPerSec)
}

// The parameter counts of the real models, norms aside, as their model
// cards give them (Llama-3.2-1B 1,235,814,400; Qwen3-0.6B 596,049,920;
// Gemma-3-1B 999,885,952 with the norms; Llama-3.2-3B 3,212,749,824;
// Qwen3-4B 4,022,468,096, both with the norms, their safetensors' totals).
func TestWeightsOfTheRealShapes(t *testing.T) {
	norms := func(c *model.Config) float64 {
		per := 2 * c.HiddenSize
		switch c.Arch {
		case model.ArchQwen3:
			per += 2 * c.HeadDim
		case model.ArchGemma3:
			per = 4*c.HiddenSize + 2*c.HeadDim
		}
		return float64(c.NumHiddenLayers*per + c.HiddenSize)
	}
	for name, want := range map[string]float64{"llama3.2-1b-bf16": 1235814400, "qwen3-0.6b-bf16": 596049920, "gemma3-1b-bf16": 999885952,
		"llama3.2-3b-bf16": 3212749824, "qwen3-4b-bf16": 4022468096} {
		sh, err := shapeFor(name, false)
		require.NoError(t, err)
		c, err := sh.opts.Config()
		require.NoError(t, err)
		assert.Equal(t, want, weightBytes(c, 1)+norms(c), name)
		assert.Equal(t, 2*weightBytes(c, 1), weightBytes(c, 2), name)
	}
	sh, err := shapeFor("llama3.2-1b-f32", false)
	require.NoError(t, err)
	assert.Equal(t, "f32", sh.opts.DType)
	_, err = shapeFor("llama3.2-8b-bf16", false)
	assert.ErrorContains(t, err, "unknown model")
}

// A hand-sized model: hidden 4, 2 heads of 2 (one KV head), intermediate
// 8, vocabulary 10, one layer.
func tinyConfig(t *testing.T, arch string) *model.Config {
	o := model.DefaultSynth(arch)
	o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 4, 1, 2, 1, 2, 8, 10
	if arch == model.ArchGemma3 {
		o.Layers, o.SlidingWindow, o.QueryPreAttnScalar = 2, 3, 2
	}
	c, err := o.Config()
	require.NoError(t, err)
	return c
}

func TestPrefillAndDecodeArithmetic(t *testing.T) {
	c := tinyConfig(t, model.ArchLlama)
	// q 4×4, k and v 4×2 each, o 4×4, three MLP weights 4×8: 16+16+16+96.
	assert.Equal(t, int64(144), layerParams(c))
	assert.Equal(t, int64(40), headParams(c))
	// 3 tokens: 2·144·3 for the layer, 2·40 for the head, and attention
	// 4·(2 heads·2)·(1+2+3 pairs).
	assert.Equal(t, float64(2*144*3+2*40+4*4*6), prefillFLOPs(c, 3))
	// Decode at position 5 sees 6 keys and values of width 2 (one KV head
	// of 2), 4 bytes each.
	assert.Equal(t, float64(6*2*2*4), kvBytes(c, 5, 4))
	// Two steps after a 5-token prompt, bf16 weights, f16 KV: positions 5
	// and 6, so 6.5 keys on average.
	assert.Equal(t, float64((144+40)*2)+6.5*2*2*2, decodeBytes(c, 2, 2, 5, 2))

	g := tinyConfig(t, model.ArchGemma3)
	require.Equal(t, []string{model.LayerSliding, model.LayerSliding}, g.LayerTypes, "two layers of a 6-layer pattern: both local")
	assert.Equal(t, 3, visible(g, 0, 10), "the window")
	assert.Equal(t, 2, visible(g, 1, 1))
	// Queries 0..4 see 1, 2, 3, 3, 3 keys in each of the two layers.
	assert.Equal(t, 4*4*float64(2*12), attentionFLOPs(g, 0, 5))
}

func TestKVSize(t *testing.T) {
	assert.Equal(t, 4.0, kvSize("f32"))
	assert.Equal(t, 2.0, kvSize("f16"))
	assert.Equal(t, 2.0, kvSize("bf16"))
	assert.Equal(t, 34.0/32, kvSize("q8_0"))
}

func TestPeakFor(t *testing.T) {
	st := settings{bin: "phase08_prefix", llamaServer: "llama-server"}
	for _, c := range []struct {
		name     string
		sd       side
		native   bool
		bf16Peak float64
		dtype    string
		want     float64
	}{
		{"f32 checkpoint: the float32 peak", st.serveSide([]string{"-bf16-dot"}), true, 800, "f32", 400},
		{"serve as shipped, a CPU with the instruction", st.serveSide(nil), true, 800, "bf16", 800},
		{"serve as shipped, a CPU without it", st.serveSide(nil), false, 800, "bf16", 400},
		{"serve -bf16-dot=false", st.serveSide([]string{"-bf16-dot=false"}), true, 800, "bf16", 400},
		{"serve with the flag", st.serveSide([]string{"-bf16-dot"}), true, 800, "bf16", 800},
		{"serve with --bf16-dot=true", st.serveSide([]string{"--bf16-dot=true"}), true, 800, "bf16", 800},
		{"the flag turned off again", st.serveSide([]string{"-bf16-dot", "-bf16-dot=false"}), true, 800, "bf16", 400},
		{"off, then auto again", st.serveSide([]string{"-bf16-dot=off", "-bf16-dot=auto"}), true, 800, "bf16", 800},
		{"llama-server multiplies bf16 in bf16", st.llamaSide(nil), false, 800, "bf16", 800},
		{"no bf16 peak given", st.serveSide([]string{"-bf16-dot"}), true, 0, "bf16", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options{peakGFLOPs: 400, peakBF16: c.bf16Peak}
			assert.Equal(t, c.want, peakFor(o, c.dtype, c.sd, c.native))
		})
	}
}

func TestCopyBandwidthIsPositive(t *testing.T) {
	assert.Positive(t, copyBandwidth(1<<20, 2, 2))
}

// BenchmarkBandwidth runs bench-real's two memory probes alone, on
// GOMAXPROCS threads: copy (read + written) and read, in GB/s, to set
// beside kernels/cpu's BenchmarkDecodeStepProducts in the same minute.
func BenchmarkBandwidth(b *testing.B) {
	threads := runtime.GOMAXPROCS(0)
	var cp, rd float64
	for b.Loop() {
		cp += copyBandwidth(512<<20, threads, 3)
		rd += readBandwidth(512<<20, threads, 3)
	}
	b.ReportMetric(cp/float64(b.N)/1e9, "copy-GB/s")
	b.ReportMetric(rd/float64(b.N)/1e9, "read-GB/s")
}

func TestParseStartup(t *testing.T) {
	out := "run 0: listening 0.38 s, first answer 0.47 s, second request 0.056 s; RSS 1222 MiB (67 anonymous, 1155 of mapped files) | model loaded in 0.00 s\nmedian: ...\n"
	s, err := parseStartup([]byte(out))
	require.NoError(t, err)
	assert.Equal(t, startup{listening: 380 * time.Millisecond, first: 470 * time.Millisecond, rss: 1222}, s)
	_, err = parseStartup([]byte("median: nothing\n"))
	assert.Error(t, err)
}

func TestPromptTokens(t *testing.T) {
	a := promptTokens(1, 1000, 5, 300)
	assert.Equal(t, a, promptTokens(1, 1000, 5, 300), "the same seed, the same prompt")
	assert.NotEqual(t, a, promptTokens(2, 1000, 5, 300))
	for _, id := range a {
		require.True(t, id >= 5 && id < 300, id)
	}
}

func TestFirstDifference(t *testing.T) {
	assert.Equal(t, -1, firstDifference([]int32{1, 2}, []int32{1, 2}))
	assert.Equal(t, 1, firstDifference([]int32{1, 2}, []int32{1, 3}))
	assert.Equal(t, 2, firstDifference([]int32{1, 2}, []int32{1, 2, 3}))
}

// fakeServer streams /completion as llama-server does: one event per
// token (the ids of the request's prompt, echoed), then a last event with
// stop and timings.
func fakeServer(t *testing.T) *httptest.Server { return httptest.NewServer(fakeCompletion(t)) }

// fakeCompletion is fakeServer's handler.
func fakeCompletion(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/completion" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Prompt   []int32 `json:"prompt"`
			NPredict int     `json:"n_predict"`
			Stream   bool    `json:"stream"`
		}
		if !assert.NoError(t, decodeJSON(r, &body)) || !assert.True(t, body.Stream) {
			http.Error(w, "bad", 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range body.NPredict {
			fmt.Fprintf(w, "data: {\"tokens\":[%d],\"stop\":false}\n\n", body.Prompt[i%len(body.Prompt)])
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: {\"tokens\":[],\"stop\":true,\"timings\":{\"prompt_n\":1,\"cache_n\":%d}}\n\n", len(body.Prompt)-1)
	}
}

func TestCompleteReadsTheStream(t *testing.T) {
	srv := fakeServer(t)
	defer srv.Close()
	s, err := complete(context.Background(), newClient(), target{url: srv.URL}, []int32{7, 8, 9}, 5)
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 8, 9, 7, 8}, s.tokens)
	assert.Len(t, s.times, 5)
	assert.Equal(t, 2, s.cached)
	assert.Positive(t, s.ttft())

	_, err = complete(context.Background(), newClient(), target{url: srv.URL + "/nowhere"}, []int32{7}, 1)
	assert.Error(t, err)
}

func TestReadEventsRefusesACutStream(t *testing.T) {
	err := readEvents(strings.NewReader("data: {\"tokens\":[1]}\n\n"), func(event, time.Time) {})
	assert.ErrorContains(t, err, "before its last event")
	err = readEvents(strings.NewReader("data: {\"error\":{\"message\":\"boom\"}}\n\n"), func(event, time.Time) {})
	assert.ErrorContains(t, err, "boom")
}

func TestServingRecordsEveryRequest(t *testing.T) {
	srv := fakeServer(t)
	defer srv.Close()
	reqs, err := workload.SystemPrompts(workload.Params{Requests: 12, PrefixLen: 8, SuffixMin: 1, SuffixMax: 4, OutputMin: 3, OutputMax: 3,
		RPS: 1, Seed: 1, Vocab: 100, Conversations: 1, Turns: 1}, 2)
	require.NoError(t, err)
	run, err := serving(context.Background(), newClient(), target{url: srv.URL}, reqs, 4)
	require.NoError(t, err)
	s := run.Summary()
	assert.Equal(t, 12, s.Completed)
	assert.Equal(t, 36, s.OutputTokens)
	for i, r := range run.Requests {
		assert.Equal(t, reqs[i].ID, r.ID)
		assert.Equal(t, len(reqs[i].Prompt)-1, r.CachedTokens)
		assert.Len(t, r.TokenTimes, 3)
	}
}

func TestCheckRefusesBadFlags(t *testing.T) {
	o := options{models: []string{"qwen3-0.6b-bf16"}, threads: 2, rounds: 1, prompt: 1000, decode: 64, requests: 32, concurrency: 8,
		systems: 4, systemLen: 256, suffixMin: 16, suffixMax: 64, output: 32, startups: 1, ctx: 16384, copyMiB: 64}
	require.NoError(t, o.check())
	o.hogs = -1
	assert.ErrorContains(t, o.check(), "-hogs")
	o.hogs = 0
	o.runLimit = -time.Second
	assert.ErrorContains(t, o.check(), "-run-limit")
	o.runLimit = 0
	o.ctx = 1000
	assert.ErrorContains(t, o.check(), "-ctx")
	o.ctx, o.models = 16384, []string{"gpt2"}
	assert.ErrorContains(t, o.check(), "unknown model")
}

func decodeJSON(r *http.Request, v any) error { return json.NewDecoder(r.Body).Decode(v) }

// The serving estimate: the computed prompt tokens at the cold prefill's
// rate, and each decode step the longer of a single decode and conc rows
// of products at the prefill's FLOP rate.
func TestServingEstimate(t *testing.T) {
	o := model.DefaultSynth(model.ArchLlama)
	o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 4, 1, 2, 1, 2, 8, 10
	r := &result{m: &prepared{shape: shape{name: "tiny", opts: o}}}
	cfg, err := o.Config()
	require.NoError(t, err)
	opts := options{prompt: 3, decode: 2, concurrency: 2}
	flops := prefillFLOPs(cfg, 3)
	s := &sample{
		ttftCold: []time.Duration{time.Second}, // flops FLOP/s
		decode:   []float64{1000},              // 1 ms a step alone
		serving: map[servingRun][]metrics.Summary{
			{shared: true}: {{PromptTokens: 10, CachedTokens: 4, OutputTokens: 7, Wall: 9 * time.Second}},
			{}:             {{PromptTokens: 10, CachedTokens: 0, OutputTokens: 7, Wall: 20 * time.Second}}, // not the bound's run
		},
	}
	b := bounds(r, s, opts, 2)
	assert.Equal(t, flops, b.prefillRate)
	assert.Equal(t, 6, b.computed)
	assert.Equal(t, 4, b.steps, "7 tokens, 2 a step")
	perStep := 2 * 2 * float64(144+40) / flops // two rows of the weights' products
	assert.InDelta(t, max(0.001, perStep), b.stepTime, 1e-12)
	assert.InDelta(t, 6.0/3+4*b.stepTime, b.serveEst, 1e-12)
	assert.Equal(t, 9.0, b.serveWall)
	assert.Equal(t, decodeBytes(cfg, 4, 2, 3, 2)*1000, b.decodeRate)
}

// Every model -models accepts has a small form of the same architecture
// and dtype, so `-small` checks the whole pipeline for it.
func TestEveryShapeHasASmallForm(t *testing.T) {
	for _, name := range append(slices.Clone(shapeNames), largeShapeNames...) {
		big, err := shapeFor(name, false)
		require.NoError(t, err, name)
		small, err := shapeFor(name, true)
		require.NoError(t, err, name)
		assert.Equal(t, big.opts.Arch, small.opts.Arch, name)
		assert.Equal(t, big.opts.DType, small.opts.DType, name)
		assert.Less(t, small.opts.Hidden*small.opts.Vocab, big.opts.Hidden*big.opts.Vocab/100, name)
	}
}

// stallingServer answers /completion as fakeServer does for the first
// `answer` requests, then accepts each later one and sends nothing, as a
// llama-server whose threads wait for a descheduled one does.
func stallingServer(t *testing.T, answer int32) *httptest.Server {
	answering := fakeCompletion(t)
	var n atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > answer {
			io.Copy(io.Discard, r.Body) // then the server notices the client go
			select {
			case <-r.Context().Done():
			case <-stop: // the test ends
			}
			return
		}
		answering(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // first: Close waits for the handlers
	return srv
}

// TestRunLimitCutsAStalledServer: a serving run against a server that
// stops answering ends at -run-limit with the finished requests counted,
// and its row says it was cut instead of a rate over the part that ran.
func TestRunLimitCutsAStalledServer(t *testing.T) {
	srv := stallingServer(t, 5)
	reqs, err := workload.SystemPrompts(workload.Params{Requests: 12, PrefixLen: 8, SuffixMin: 1, SuffixMax: 4, OutputMin: 3, OutputMax: 3,
		RPS: 1, Seed: 1, Vocab: 100, Conversations: 1, Turns: 1}, 2)
	require.NoError(t, err)
	var s metrics.Summary
	done := make(chan error, 1)
	go func() {
		var err error
		s, err = limitedServing(context.Background(), 300*time.Millisecond, newClient(), target{url: srv.URL}, reqs, 2)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "a cut run is a result, not an error")
	case <-time.After(20 * time.Second):
		t.Fatal("a run limit of 0.3 s did not end the run in 20 s")
	}
	assert.Equal(t, 12, s.Requests)
	assert.Equal(t, 5, s.Completed)
	assert.Equal(t, 7, s.Failed)
	row := servingRow("m", "serve", servingRun{shared: true}, []metrics.Summary{s})
	assert.Contains(t, row[3], "cut at")
	assert.Contains(t, row[3], "5 of 12 done")
	assert.Equal(t, "–", row[4], "no TTFT percentiles over the requests that happened to finish")

	// Without a limit, a server that answers is measured as before, and a
	// failure that is not the limit's is the run's error.
	fake := fakeServer(t)
	defer fake.Close()
	s, err = limitedServing(context.Background(), 0, newClient(), target{url: fake.URL}, reqs, 2)
	require.NoError(t, err)
	assert.Equal(t, 12, s.Completed)
	_, err = limitedServing(context.Background(), time.Minute, newClient(), target{url: fake.URL + "/nowhere"}, reqs, 2)
	assert.ErrorContains(t, err, "HTTP 404")
}

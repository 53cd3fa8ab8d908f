package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kvlab/common/engine"
)

// llamaMetrics are llama-server's llamacpp:* series, beside the kvlab:*
// ones, so a dashboard or autoscaler built for llama-server reads this
// server too. Names, types and help are llama-server's; the values are
// the nearest this engine has (docs/serving.md says where they differ):
//
//   - the token and time totals are summed per request when it ends, as
//     llama-server sums them per slot: prompt tokens computed (the prompt
//     less what the prefix cache held), the time to the first token, the
//     tokens generated and the time from the first token to the last;
//   - the two throughput gauges cover the requests that ended since the
//     previous scrape, as llama-server's "bucket" does;
//   - n_decode_total is the engine's steps with a forward pass, and
//     n_busy_slots_per_decode the decode rows per such step;
//   - the speculative-decoding counters are 0: the engine does not draft.
type llamaMetrics struct {
	mu        sync.Mutex
	total     llamaTimes // since start
	bucket    llamaTimes // since the last scrape
	shown     llamaTimes // the bucket the scrape being served reports
	cached    int        // prompt tokens the prefix cache held, since start
	tokensMax int        // most tokens one sequence held
	http      http.Handler
}

// llamaTimes are token counts and the time they took.
type llamaTimes struct {
	prompt, predicted         int
	promptTime, predictedTime time.Duration
}

func newLlamaMetrics(reg *prometheus.Registry, es *engine.Server) *llamaMetrics {
	m := &llamaMetrics{http: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	read := func(f func(*llamaMetrics) float64) func() float64 {
		return func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			return f(m)
		}
	}
	snap := func(f func(engine.Snapshot) float64) func() float64 {
		return func() float64 { return f(es.Snapshot()) }
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "llamacpp:" + name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llamacpp:" + name, Help: help}, f)
	}
	rate := func(n int, d time.Duration) float64 {
		if n == 0 || d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	zero := func() float64 { return 0 } // no speculative decoding here
	reg.MustRegister(
		counter("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", read(func(m *llamaMetrics) float64 { return float64(m.total.prompt) })),
		counter("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", read(func(m *llamaMetrics) float64 { return float64(m.cached) })),
		counter("prompt_seconds_total", "Total time spent processing prompts", read(func(m *llamaMetrics) float64 { return m.total.promptTime.Seconds() })),
		counter("tokens_predicted_total", "Number of generation tokens processed", read(func(m *llamaMetrics) float64 { return float64(m.total.predicted) })),
		counter("tokens_predicted_seconds_total", "Total time spent generating tokens", read(func(m *llamaMetrics) float64 { return m.total.predictedTime.Seconds() })),
		counter("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", snap(func(s engine.Snapshot) float64 { return float64(s.Stats.Steps) })),
		counter("n_tokens_max", "Largest observed sequence length (prompt + generation)", read(func(m *llamaMetrics) float64 { return float64(m.tokensMax) })),
		counter("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", zero),
		counter("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", zero),
		counter("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", zero),
		gauge("prompt_tokens_seconds", "Average prompt throughput in tokens/s", read(func(m *llamaMetrics) float64 { return rate(m.shown.prompt, m.shown.promptTime) })),
		gauge("predicted_tokens_seconds", "Average generation throughput in tokens/s", read(func(m *llamaMetrics) float64 { return rate(m.shown.predicted, m.shown.predictedTime) })),
		gauge("requests_processing", "Number of requests processing", snap(func(s engine.Snapshot) float64 { return float64(s.Running) })),
		gauge("requests_deferred", "Number of requests deferred", snap(func(s engine.Snapshot) float64 { return float64(s.Waiting + s.Inbox) })),
		gauge("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", snap(func(s engine.Snapshot) float64 {
			return float64(s.Stats.DecodeTokens) / float64(max(s.Stats.Steps, 1))
		})),
	)
	return m
}

// observe adds a request that ended (finished, failed or cancelled) to
// the totals and the bucket.
func (m *llamaMetrics) observe(res *genResult) {
	if res == nil {
		return
	}
	end := res.lastToken
	if res.firstToken.IsZero() {
		end = time.Now()
	}
	var t llamaTimes
	t.prompt = max(res.promptTokens-res.cached, 0)
	t.predicted = res.completion
	if !res.firstToken.IsZero() {
		t.promptTime = res.firstToken.Sub(res.start)
		t.predictedTime = end.Sub(res.firstToken)
	} else {
		t.promptTime = end.Sub(res.start)
	}
	longest := 0
	for _, s := range res.samples {
		longest = max(longest, len(s.ids))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total.add(t)
	m.bucket.add(t)
	m.cached += res.cached
	m.tokensMax = max(m.tokensMax, res.promptTokens+longest)
}

func (t *llamaTimes) add(u llamaTimes) {
	t.prompt += u.prompt
	t.predicted += u.predicted
	t.promptTime += u.promptTime
	t.predictedTime += u.predictedTime
}

// serveMetrics is GET /metrics: every series, with llama-server's
// Process-Start-Time-Unix header; or llama-server's 501 with
// Options.NoMetrics. Each scrape starts a new throughput bucket.
func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if h.opts.NoMetrics {
		writeError(w, errNotSupported("This server does not support metrics endpoint. Start it with `--metrics`"))
		return
	}
	m := h.llama
	m.mu.Lock()
	m.shown, m.bucket = m.bucket, llamaTimes{}
	m.mu.Unlock()
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(h.created, 10))
	m.http.ServeHTTP(w, r)
}

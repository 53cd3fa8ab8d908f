package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kvlab/common/engine"
)

// metrics are the server's Prometheus series. Names follow vLLM's where it
// has one (vllm:num_requests_running → kvlab:num_requests_running, …), so
// a dashboard written for one reads the other. Counters count tokens or
// events since start; a hit rate over time is a PromQL query:
//
//	rate(kvlab:prefix_cache_hits_total[1m]) / rate(kvlab:prefix_cache_queries_total[1m])
//
// Gauges and counters of engine state are read from the engine.Server's
// snapshot at scrape time; the histograms and the request counters are fed
// by the handlers.
type metrics struct {
	ttft             prometheus.Histogram
	itl              prometheus.Histogram
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	finished         *prometheus.CounterVec // per request: stop, length, abort
	failed           *prometheus.CounterVec // per request: error, rejected
	rejected         prometheus.Counter
	panics           prometheus.Counter
	textBusy         prometheus.Counter
}

// count adds a request's outcome (see outcome.go) to its counter.
func (m *metrics) count(oc *outcome) {
	switch reason := oc.get(); reason {
	case "stop", "length", "abort":
		m.finished.WithLabelValues(reason).Inc()
	case "error":
		m.failed.WithLabelValues("error").Inc()
	default:
		m.failed.WithLabelValues("rejected").Inc()
	}
}

func newMetrics(reg *prometheus.Registry, es *engine.Server) *metrics {
	latency := []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	m := &metrics{
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvlab:time_to_first_token_seconds",
			Help: "Time from a request's arrival to its first generated token.", Buckets: latency}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvlab:inter_token_latency_seconds",
			Help: "Time between consecutive tokens of one sample.", Buckets: latency}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab:prompt_tokens_total",
			Help: "Prompt tokens of the requests accepted."}),
		generationTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab:generation_tokens_total",
			Help: "Tokens generated (every sample)."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab:request_success_total",
			Help: "Requests finished, by reason: stop, length or abort (client gone, too slow a reader, shutdown)."}, []string{"finished_reason"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab:request_failure_total",
			Help: "Requests that failed (error) or were refused before running (rejected)."}, []string{"reason"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab:requests_rejected_queue_full_total",
			Help: "Requests refused with 429 because the waiting queue was full."}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab:request_panics_total",
			Help: "Panics recovered while serving a request: each answered 500 (or its answer cut off), its stack logged."}),
		textBusy: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab:text_requests_refused_total",
			Help: "/tokenize and /detokenize requests refused with 503 because -max-text-requests were being served."}),
	}
	snap := es.Snapshot
	gauge := func(name, help string, f func(engine.Snapshot) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(snap()) })
	}
	counter := func(name, help string, f func(engine.Snapshot) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(snap()) })
	}
	reg.MustRegister(
		m.ttft, m.itl, m.promptTokens, m.generationTokens, m.finished, m.failed, m.rejected, m.panics, m.textBusy,
		gauge("kvlab:num_requests_running", "Sequences admitted (prefilling or decoding).",
			func(s engine.Snapshot) float64 { return float64(s.Running) }),
		gauge("kvlab:num_requests_waiting", "Sequences waiting for admission, including requests not yet seen by the engine.",
			func(s engine.Snapshot) float64 { return float64(s.Waiting + s.Inbox) }),
		gauge("kvlab:kv_cache_usage_perc", "Fraction of KV blocks not on the free list (held by sequences or the prefix cache).",
			func(s engine.Snapshot) float64 {
				return float64(s.TotalBlocks-s.FreeBlocks) / float64(max(s.TotalBlocks, 1))
			}),
		gauge("kvlab:kv_blocks_capacity", "KV blocks in the pool.",
			func(s engine.Snapshot) float64 { return float64(s.TotalBlocks) }),
		gauge("kvlab:kv_blocks_used", "KV blocks not on the free list.",
			func(s engine.Snapshot) float64 { return float64(s.TotalBlocks - s.FreeBlocks) }),
		gauge("kvlab:kv_blocks_free", "KV blocks on the free list.",
			func(s engine.Snapshot) float64 { return float64(s.FreeBlocks) }),
		gauge("kvlab:kv_blocks_cached", "KV blocks the prefix cache references (some may also be in use).",
			func(s engine.Snapshot) float64 { return float64(s.CacheBlocks) }),
		counter("kvlab:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache (at first admission).",
			func(s engine.Snapshot) float64 { return float64(s.Stats.QueriedTokens) }),
		counter("kvlab:prefix_cache_hits_total", "Prompt tokens whose KV the prefix cache held (at first admission).",
			func(s engine.Snapshot) float64 { return float64(s.Stats.CachedTokens) }),
		counter("kvlab:prefix_cache_tail_hits_total", "Prompts that continued a kept partial last block (-tail-blocks); their tokens from it are in prefix_cache_hits_total.",
			func(s engine.Snapshot) float64 { return float64(s.Tails.Hits) }),
		gauge("kvlab:kv_tail_blocks_held", "Partial last blocks of ended sequences kept for the next prompt that continues one (-tail-blocks).",
			func(s engine.Snapshot) float64 { return float64(s.Tails.Held) }),
		counter("kvlab:prefix_cache_evictions_total", "KV blocks evicted from the prefix cache.",
			func(s engine.Snapshot) float64 { return float64(s.Evicted) }),
		counter("kvlab:kv_block_copies_total", "Copy-on-write block copies.",
			func(s engine.Snapshot) float64 { return float64(s.Copies) }),
		counter("kvlab:num_preemptions_total", "Sequences preempted (KV dropped, recomputed later).",
			func(s engine.Snapshot) float64 { return float64(s.Stats.Preemptions) }),
		counter("kvlab:prefill_tokens_computed_total", "Prompt and recompute tokens run through the model.",
			func(s engine.Snapshot) float64 { return float64(s.Stats.PrefillTokens) }),
		counter("kvlab:decode_tokens_computed_total", "Decode rows run through the model.",
			func(s engine.Snapshot) float64 { return float64(s.Stats.DecodeTokens) }),
		counter("kvlab:engine_steps_total", "Engine steps that ran a forward pass.",
			func(s engine.Snapshot) float64 { return float64(s.Stats.Steps) }),
		counter("kvlab:requests_too_slow_total", "Requests cancelled because their client fell more than the unread-event budget behind.",
			func(s engine.Snapshot) float64 { return float64(s.TooSlow) }),
		collectors.NewGoCollector(),
		missCollector{snap},   // miss_metrics.go
		verifyCollector{snap}, // verify_metrics.go
	)
	if len(snap().Tiers) > 0 {
		reg.MustRegister(tierCollector{snap}) // tier_metrics.go
	}
	return m
}

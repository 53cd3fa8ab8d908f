package router

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// routerMetrics are the router's own series on its /metrics. The cached
// and prompt token counters are sums of what the replicas reported in the
// answers the router relayed; matched_tokens is what the policy believed
// they would find, kept apart so the two can be compared.
type routerMetrics struct {
	requests  *prometheus.CounterVec // per replica
	prompt    *prometheus.CounterVec // per replica, from the replicas' usage
	cached    *prometheus.CounterVec // per replica, from the replicas' usage
	matched   *prometheus.CounterVec // per replica, the policy's belief
	decisions *prometheus.CounterVec // by reason
	downs     *prometheus.CounterVec // per replica
	retries   prometheus.Counter
	aborted   prometheus.Counter
	slotted   *prometheus.CounterVec // by how the slot was chosen
	warms     *prometheus.CounterVec // by result
	failures  *prometheus.CounterVec // per replica and reason
	ejections *prometheus.CounterVec // per replica

	mu    sync.Mutex
	stats []ReplicaStats
}

// ReplicaStats is what the router counted for one replica.
type ReplicaStats struct {
	// Requests were relayed from the replica (retried attempts excluded).
	Requests int
	// PromptTokens and CachedTokens sum the replica's own usage reports.
	PromptTokens, CachedTokens int
}

func newRouterMetrics(reg *prometheus.Registry, rt *Router) *routerMetrics {
	labels := []string{"replica"}
	m := &routerMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:requests_total",
			Help: "Requests relayed from each replica."}, labels),
		prompt: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:prompt_tokens_total",
			Help: "Prompt tokens of relayed requests, as each replica reported them."}, labels),
		cached: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:cached_tokens_total",
			Help: "Prompt tokens each replica reported finding in its prefix cache (usage.prompt_tokens_details.cached_tokens, tokens_cached): the fleet's real hits."}, labels),
		matched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:policy_matched_tokens_total",
			Help: "Prompt tokens the routing policy believed the chosen replica held (a guess for prefix; the replica's events for kv-events)."}, labels),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:decisions_total",
			Help: "Routing decisions by reason: round-robin, least-load, prefix-match, kv-match, prefix-overflow."}, []string{"reason"}),
		downs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:replica_down_total",
			Help: "Times each replica was taken out of the fleet."}, labels),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab_router:retries_total",
			Help: "Requests tried again on another replica because theirs failed before answering."}),
		aborted: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvlab_router:aborted_streams_total",
			Help: "Streams ended with an error event because the replica failed after tokens were sent."}),
		slotted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:slot_decisions_total",
			Help: "With --slots: requests sent with an id_slot the router chose (named), with the client's own (client), or left to the replica (replica)."}, []string{"how"}),
		warms: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:slot_warms_total",
			Help: "Slot copies from a request's prefix replica to the replica it was placed on (save, then restore), by result: ok, failed, nothing (no idle slot held the prefix, or none was free)."}, []string{"result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:replica_failures_total",
			Help: "Failed attempts at each replica, by reason: connect, response_timeout, idle_timeout, hung (moved off a replica whose /health timed out), status_5xx, broken."}, []string{"replica", "reason"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvlab_router:ejections_total",
			Help: "Times each replica was ejected for failing -eject-after attempts in a row."}, labels),
		stats: make([]ReplicaStats, len(rt.replicas)),
	}
	up := prometheus.NewGaugeFunc // one gauge per replica, read at scrape time
	for i := range rt.replicas {
		idx := i
		reg.MustRegister(up(prometheus.GaugeOpts{Name: "kvlab_router:replica_up", Help: "1 while the replica takes requests.",
			ConstLabels: prometheus.Labels{"replica": strconv.Itoa(i), "url": rt.replicas[i].url}}, func() float64 {
			if rt.Up()[idx] {
				return 1
			}
			return 0
		}))
		reg.MustRegister(up(prometheus.GaugeOpts{Name: "kvlab_router:replica_ejected", Help: "1 while the replica is ejected for failing requests (its /health may still answer).",
			ConstLabels: prometheus.Labels{"replica": strconv.Itoa(i)}}, func() float64 {
			if rt.Ejected()[idx] {
				return 1
			}
			return 0
		}))
		reg.MustRegister(up(prometheus.GaugeOpts{Name: "kvlab_router:requests_running", Help: "Requests in flight on the replica.",
			ConstLabels: prometheus.Labels{"replica": strconv.Itoa(i)}}, func() float64 {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return float64(rt.replicas[idx].load)
		}))
	}
	reg.MustRegister(m.requests, m.prompt, m.cached, m.matched, m.decisions, m.downs, m.retries, m.aborted, m.slotted, m.warms, m.failures, m.ejections)
	return m
}

// count records a relayed request's usage.
func (m *routerMetrics) count(i int, u usageSeen) {
	l := strconv.Itoa(i)
	m.mu.Lock()
	m.stats[i].Requests++
	if u.seen {
		m.stats[i].PromptTokens += u.prompt
		m.stats[i].CachedTokens += u.cached
	}
	m.mu.Unlock()
	if u.seen {
		m.prompt.WithLabelValues(l).Add(float64(u.prompt))
		m.cached.WithLabelValues(l).Add(float64(u.cached))
	}
}

// Stats returns what the router counted per replica so far.
func (rt *Router) Stats() []ReplicaStats {
	rt.metrics.mu.Lock()
	defer rt.metrics.mu.Unlock()
	return append([]ReplicaStats(nil), rt.metrics.stats...)
}

// Warms returns how many slot copies (save, then restore) succeeded.
func (rt *Router) Warms() int { return int(rt.warmed.Load()) }

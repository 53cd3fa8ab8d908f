package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"kvlab/common/engine"
)

// verifyCollector reports the engine's hit verification (engine
// Config.VerifyHits): hits recomputed and compared, hits whose cached KV
// differed from the recompute (each one forgotten from the cache), and
// hits left unchecked because the verifier was still busy. A failure is a
// broken exactness claim or damaged memory: worth an alert at 1.
type verifyCollector struct {
	snap func() engine.Snapshot
}

var (
	verifiedTotal = prometheus.NewDesc("kvlab:prefix_cache_verified_total",
		"Prefix-cache hits recomputed from scratch and compared bit for bit with the cached KV (-verify-hits).", nil, nil)
	verifyFailuresTotal = prometheus.NewDesc("kvlab:prefix_cache_verify_failures_total",
		"Verified prefix-cache hits whose cached KV or next-token logits differed from a recompute; the block was forgotten.", nil, nil)
	verifySkippedTotal = prometheus.NewDesc("kvlab:prefix_cache_verify_skipped_total",
		"Prefix-cache hits due for verification but skipped because the verifier's queue was full.", nil, nil)
)

func (c verifyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- verifiedTotal
	ch <- verifyFailuresTotal
	ch <- verifySkippedTotal
}

func (c verifyCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.snap().Stats
	ch <- prometheus.MustNewConstMetric(verifiedTotal, prometheus.CounterValue, float64(st.VerifyChecked))
	ch <- prometheus.MustNewConstMetric(verifyFailuresTotal, prometheus.CounterValue, float64(st.VerifyFailed))
	ch <- prometheus.MustNewConstMetric(verifySkippedTotal, prometheus.CounterValue, float64(st.VerifySkipped))
}

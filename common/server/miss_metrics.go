package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"kvlab/common/engine"
	"kvlab/common/kvcache/misses"
)

// missCollector reports why computed prompt tokens missed the prefix
// cache, one series per reason, so a falling hit rate can be told apart:
// evictions call for a bigger pool, salt for fewer tenants, cold for none.
type missCollector struct {
	snap func() engine.Snapshot
}

var missTokens = prometheus.NewDesc("kvlab:prefix_cache_miss_tokens_total", "Prompt tokens computed rather than reused, by why the prefix cache did not have them (preempted: recomputed after a preemption).", []string{"reason"}, nil)

func (c missCollector) Describe(ch chan<- *prometheus.Desc) { ch <- missTokens }

func (c missCollector) Collect(ch chan<- prometheus.Metric) {
	for i, v := range c.snap().Stats.Misses.Counts() {
		ch <- prometheus.MustNewConstMetric(missTokens, prometheus.CounterValue, float64(v), misses.Names[i])
	}
}

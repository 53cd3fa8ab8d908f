package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"kvlab/common/kvcache/ghost"
)

// ghostCollector reports the ghost caches (common/kvcache/ghost) under
// /metrics: beside the real prefix cache, what each rival eviction policy
// would have found on the same traffic, one series per cache, labelled by
// its name ("real" for the cache that serves).
type ghostCollector struct {
	report func() ghost.Report
}

var (
	ghostQueried = prometheus.NewDesc("kvlab:ghost_queried_tokens_total", "Prompt tokens the prefix cache was asked for at first admission, which the ghosts were asked for too.", nil, nil)
	ghostHits    = prometheus.NewDesc("kvlab:ghost_hit_tokens_total", "Prompt tokens each cache found cached (the real one as it served them; a ghost policy as it would have).", []string{"cache"}, nil)
	ghostEvicted = prometheus.NewDesc("kvlab:ghost_evicted_blocks_total", "KV blocks each cache evicted under the same pressure.", []string{"cache"}, nil)
	ghostCached  = prometheus.NewDesc("kvlab:ghost_cached_blocks", "KV blocks each cache holds now.", []string{"cache"}, nil)
)

func (c ghostCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ghostQueried, ghostHits, ghostEvicted, ghostCached} {
		ch <- d
	}
}

func (c ghostCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.report()
	ch <- prometheus.MustNewConstMetric(ghostQueried, prometheus.CounterValue, float64(r.Queried))
	for _, row := range r.Rows {
		ch <- prometheus.MustNewConstMetric(ghostHits, prometheus.CounterValue, float64(row.Hits), row.Name)
		ch <- prometheus.MustNewConstMetric(ghostEvicted, prometheus.CounterValue, float64(row.Evicted), row.Name)
		ch <- prometheus.MustNewConstMetric(ghostCached, prometheus.GaugeValue, float64(row.Cached), row.Name)
	}
}

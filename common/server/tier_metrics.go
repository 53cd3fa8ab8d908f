package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"kvlab/common/engine"
)

// tierCollector reports the cache tiers (engine.Config.Tiers) under
// /metrics, one series per tier, labelled by the tier's name ("CPU",
// "DISK"), from the engine's snapshot: what each holds, what came in and
// went back out, and what the pool did with them.
type tierCollector struct {
	snap func() engine.Snapshot
}

var (
	tierBlocks    = prometheus.NewDesc("kvlab:tier_blocks", "KV blocks a cache tier holds.", []string{"tier"}, nil)
	tierBytes     = prometheus.NewDesc("kvlab:tier_bytes", "Bytes a cache tier holds (KV and tokens).", []string{"tier"}, nil)
	tierCapacity  = prometheus.NewDesc("kvlab:tier_capacity_bytes", "A cache tier's byte budget.", []string{"tier"}, nil)
	tierPuts      = prometheus.NewDesc("kvlab:tier_puts_total", "KV blocks stored in a cache tier: demoted from the pool or passed down from the tier above.", []string{"tier"}, nil)
	tierHits      = prometheus.NewDesc("kvlab:tier_hits_total", "KV blocks a cache tier gave back to the pool (promoted).", []string{"tier"}, nil)
	tierEvictions = prometheus.NewDesc("kvlab:tier_evictions_total", "KV blocks a cache tier evicted (passed on to the next tier, or dropped after the last).", []string{"tier"}, nil)
	tierDropped   = prometheus.NewDesc("kvlab:tier_dropped_total", "KV blocks a cache tier could not store (too big, its write queue full, a write failed).", []string{"tier"}, nil)
	tierCorrupt   = prometheus.NewDesc("kvlab:tier_corrupt_total", "KV blocks a cache tier found damaged (checksum or identity) and never promoted.", []string{"tier"}, nil)
	tierSkipped   = prometheus.NewDesc("kvlab:tier_promotions_skipped_total", "Promotions the pool skipped because copying a block from the tier cost more than computing it.", []string{"tier"}, nil)
	tierDemoted   = prometheus.NewDesc("kvlab:tier_demotions_total", "KV blocks the pool copied into its first cache tier when the prefix cache evicted them.", nil, nil)
	tierKept      = prometheus.NewDesc("kvlab:tier_demotions_kept_total", "Evicted KV blocks the first cache tier held already: not copied again.", nil, nil)
)

func (c tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tierBlocks, tierBytes, tierCapacity, tierPuts, tierHits, tierEvictions, tierDropped, tierCorrupt, tierSkipped, tierDemoted, tierKept} {
		ch <- d
	}
}

func (c tierCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	for i, t := range s.Tiers {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, t.Name)
		}
		count := func(d *prometheus.Desc, v int) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), t.Name)
		}
		gauge(tierBlocks, float64(t.Blocks))
		gauge(tierBytes, float64(t.Bytes))
		gauge(tierCapacity, float64(t.Capacity))
		count(tierPuts, t.Puts)
		count(tierHits, t.Hits)
		count(tierEvictions, t.Evictions)
		count(tierDropped, t.Dropped)
		count(tierCorrupt, t.Corrupt)
		if i < len(s.TierCounters.Skipped) {
			count(tierSkipped, s.TierCounters.Skipped[i])
		}
	}
	ch <- prometheus.MustNewConstMetric(tierDemoted, prometheus.CounterValue, float64(s.TierCounters.Demoted))
	ch <- prometheus.MustNewConstMetric(tierKept, prometheus.CounterValue, float64(s.TierCounters.DemotedKept))
}

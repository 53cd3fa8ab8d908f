package main

import (
	"fmt"
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
)

// BenchmarkCache runs the shared data-structure benchmarks.
func BenchmarkCache(b *testing.B) { cachetest.Benchmarks(b, trie.PrefixCache) }

// BenchmarkEngine runs the shared engine benchmarks with the trie.
func BenchmarkEngine(b *testing.B) { cachetest.EngineBenchmarks(b, trie.PrefixCache) }

// BenchmarkEvictionPolicy replays the shared-bases workload (see
// sharedBases) under memory pressure with each policy and reports the hit
// rate: cached tokens / prompt tokens.
func BenchmarkEvictionPolicy(b *testing.B) {
	prompts := sharedBases(400)
	for _, p := range []struct {
		name   string
		policy trie.Policy
	}{{"deepest-first", trie.DeepestFirst}, {"lru", trie.LRU}, {"priority", trie.Priority}, {"size-aware", trie.SizeAware}, {"levels-in-nodes", nodeLevels{}}} {
		b.Run("policy="+p.name, func(b *testing.B) {
			var r replayed
			for b.Loop() {
				r = replay(b, prompts, p.policy)
			}
			b.ReportMetric(r.hitRate(), "hit-rate")
			b.ReportMetric(float64(r.evicted), "evicted-blocks")
		})
	}
}

// BenchmarkPitfallThreeComparesPerDescent times the scanning match against
// the trie's one-lookup descent on tries of growing width, matching the
// same 16 queries (spread over the trie) at every width.
func BenchmarkPitfallThreeComparesPerDescent(b *testing.B) {
	for _, width := range []int{4, 16, 64} {
		tr, all := wideTrie(b, width)
		shape := tr.Shape()
		var queries [][]int32
		for i := range 16 {
			queries = append(queries, all[i*len(all)/16])
		}
		b.Run(fmt.Sprintf("width=%d/scan", width), func(b *testing.B) {
			compares := 0
			for i := 0; b.Loop(); i++ {
				matchByScanning(shape, queries[i%16], 16, &compares)
			}
		})
		b.Run(fmt.Sprintf("width=%d/lookup", width), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				tr.MatchLen("", queries[i%16])
			}
		})
	}
}

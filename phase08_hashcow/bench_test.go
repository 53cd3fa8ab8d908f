package main

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_hashcow/blockhash"
)

// BenchmarkCache runs the data-structure benchmarks every variant shares.
func BenchmarkCache(b *testing.B) { cachetest.Benchmarks(b, newCache) }

// BenchmarkEngine serves the prefix_caching workload with the cache; the
// baseline row is phase07_chunked's BenchmarkEngine.
func BenchmarkEngine(b *testing.B) { cachetest.EngineBenchmarks(b, newCache) }

// BenchmarkHash measures the cost of keying one 16-token block, reported per
// token, for each hash the cache can use.
func BenchmarkHash(b *testing.B) {
	block := cachetest.Tokens(1000, 16)
	for _, h := range []struct {
		name string
		f    blockhash.HashFunc
	}{
		{"fnv1a", blockhash.FNV1a},
		{"xxhash", blockhash.XXHash},
	} {
		b.Run(h.name, func(b *testing.B) {
			key := blockhash.Root
			b.ReportAllocs()
			for b.Loop() {
				key = h.f(key, block) // chained, as the cache does
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(block)), "ns/token")
			sink = key
		})
	}
}

// sink keeps the compiler from dropping the hashing.
var sink uint64

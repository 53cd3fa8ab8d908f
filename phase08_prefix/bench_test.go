package main

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// BenchmarkCache runs the data-structure benchmarks every variant shares
// (Match, MatchLen, Insert, Evict) on the radix tree.
func BenchmarkCache(b *testing.B) { cachetest.Benchmarks(b, radix.New) }

// BenchmarkEngine serves the shared prefix_caching workloads with the tree;
// compare with phase07_chunked's BenchmarkEngine.
func BenchmarkEngine(b *testing.B) { cachetest.EngineBenchmarks(b, radix.New) }

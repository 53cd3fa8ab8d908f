package trie

import (
	"testing"

	"kvlab/common/kvcache/cachetest"
)

// BenchmarkScale fills the cache through a real pool to 10k, 100k and 1M
// blocks (10k and 100k with -short) and measures each operation there
// (cachetest.ScaleBenchmarks; make bench-scale).
func BenchmarkScale(b *testing.B) {
	cachetest.ScaleBenchmarks(b, PrefixCache, cachetest.ScaleSizes(testing.Short()))
}

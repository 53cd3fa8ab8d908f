package ghost

import (
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_prefix/radix"
)

// tapOf returns a factory of radix trees in a Tap with policies.
func tapOf(policies ...Policy) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return NewTap(radix.New(a, bs), bs, a.Total(), Config{Policies: policies})
	}
}

// BenchmarkTap runs the data-structure benchmarks every design shares on a
// radix tree alone, in a Tap with the LRU ghost, and in a Tap with every
// ghost: what the Tap costs per call, on top of the tree. Compare the
// three with benchstat:
//
//	go test ./common/kvcache/ghost/ -run '^$' -bench 'Tap$' -count 6 > tap.txt
//	go tool benchstat -col /cache tap.txt
func BenchmarkTap(b *testing.B) {
	b.Run("cache=radix", func(b *testing.B) { cachetest.Benchmarks(b, radix.New) })
	b.Run("cache=radix+LRU", func(b *testing.B) { cachetest.Benchmarks(b, tapOf(LRU())) })
	b.Run("cache=radix+all", func(b *testing.B) { cachetest.Benchmarks(b, tapOf(Standard(nil)...)) })
}

// BenchmarkTapEngine serves the engine benchmarks' prefix_caching
// workload on a radix tree alone and in a Tap with every ghost: what the
// ghosts cost a whole run, next to the model's work.
//
//	go test ./common/kvcache/ghost/ -run '^$' -bench TapEngine -count 6 > engine.txt
//	go tool benchstat -col /cache engine.txt
func BenchmarkTapEngine(b *testing.B) {
	b.Run("cache=radix", func(b *testing.B) { cachetest.EngineBenchmarks(b, radix.New) })
	b.Run("cache=radix+all", func(b *testing.B) { cachetest.EngineBenchmarks(b, tapOf(Standard(nil)...)) })
}

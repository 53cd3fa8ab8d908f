package main

import (
	"fmt"
	"testing"
	"time"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/kvevents"
	"kvlab/phase08_hashcow/blockhash"
)

// BenchmarkCache runs the data-structure benchmarks every variant shares.
func BenchmarkCache(b *testing.B) { cachetest.Benchmarks(b, blockhash.PrefixCache) }

// BenchmarkEngine serves the prefix_caching workload with the cache; the
// baseline row is phase07_chunked's BenchmarkEngine.
func BenchmarkEngine(b *testing.B) { cachetest.EngineBenchmarks(b, blockhash.PrefixCache) }

// hashes names every hash the cache can key blocks with.
var hashes = []struct {
	name string
	f    blockhash.HashFunc
}{
	{"maphash", blockhash.MapHash},
	{"wordhash", blockhash.WordHash},
	{"xxhash", blockhash.XXHash},
	{"fnv1a", blockhash.FNV1a},
}

// BenchmarkHash measures the cost of keying one 16-token block, reported per
// token, for each hash the cache can use.
func BenchmarkHash(b *testing.B) {
	block := cachetest.Tokens(1000, 16)
	for _, h := range hashes {
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
	// vLLM's hash (blockhash.WithVLLMHash) chains 32 bytes, not a uint64.
	b.Run("vllm", func(b *testing.B) {
		full := kvevents.RootHash(kvevents.DefaultHashSeed)
		b.ReportAllocs()
		for b.Loop() {
			full = kvevents.HashBlock(full, block, "")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(block)), "ns/token")
		sink = full.Uint64()
	})
}

// BenchmarkMatchHash is the shared Match/tokens=1024 benchmark (Match and
// Release of a fully cached 1024-token prompt, block size 16) with each
// hash, and shows the hash's share of it: after the timed loop it times
// keying the same prompt's 64 blocks as often, alone, and reports that as
// hash-ns/token and as a percentage of the Match time.
func BenchmarkMatchHash(b *testing.B) {
	const n, bs = 1024, 16
	prompt := cachetest.Tokens(0, n)
	for _, h := range hashes {
		b.Run(fmt.Sprintf("hash=%s", h.name), func(b *testing.B) {
			hc := cachetest.NewHarness(b, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
				return blockhash.New(a, bs, blockhash.WithHash(h.f))
			}, 2*n/bs+8, bs)
			hc.Start(0, prompt)
			hc.Finish(0)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, got := hc.Cache.Match(i+1, "", prompt); got != n {
					b.Fatalf("matched %d tokens; want %d", got, n)
				}
				hc.Cache.Release(i + 1)
			}
			match := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / n
			start := time.Now()
			key := blockhash.Root
			for range b.N {
				key = blockhash.Root
				for end := bs; end <= n; end += bs {
					key = h.f(key, prompt[end-bs:end])
				}
			}
			sink = key
			hash := float64(time.Since(start).Nanoseconds()) / float64(b.N) / n
			b.ReportMetric(match, "ns/token")
			b.ReportMetric(hash, "hash-ns/token")
			b.ReportMetric(100*hash/match, "hash-%")
		})
	}
	b.Run("hash=vllm", func(b *testing.B) {
		hc := cachetest.NewHarness(b, blockhash.VLLMPrefixCache(kvevents.Hasher{}), 2*n/bs+8, bs)
		hc.Start(0, prompt)
		hc.Finish(0)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, got := hc.Cache.Match(i+1, "", prompt); got != n {
				b.Fatalf("matched %d tokens; want %d", got, n)
			}
			hc.Cache.Release(i + 1)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/token")
	})
}

// sink keeps the compiler from dropping the hashing.
var sink uint64

package cachetest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// Scale sizes: the number of blocks the cache holds when the measurements
// start. ScaleSizes(true) is the -short set.
func ScaleSizes(short bool) []int {
	if short {
		return []int{10_000, 100_000}
	}
	return []int{10_000, 100_000, 1_000_000}
}

// scaleName spells a size the way the benchmark names carry it.
func scaleName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}

// Traffic shape of the scale benchmarks: a few system prompts shared by
// many requests, each followed by a suffix of its own.
const (
	scaleBlockSize = 16
	scaleSystems   = 64    // distinct system prompts
	scaleSystemLen = 1_024 // tokens of each
	scaleSuffixMin = 256   // suffix tokens, uniform in [min, max]
	scaleSuffixMax = 2_048
	scaleHeadroom  = 4_096 // pool blocks beyond the cached target
	scaleHitLen    = 1_536 // tokens of the Match benchmark's prompt
)

// scaleWorld is a pool filled with cached traffic, shared by the
// measurements of one size.
type scaleWorld struct {
	pool  *kvcache.Pool
	cache kvcache.PrefixCache
	next  int // next sequence id, and the seed of the next suffix
	hit   []int32
}

// scaleSystem returns system prompt i's tokens.
func scaleSystem(i int) []int32 { return Tokens(1_000_000*(i+1), scaleSystemLen) }

// run opens, grows, commits and releases one sequence of prompt, as the
// engine does for a finished request.
func (w *scaleWorld) run(b *testing.B, prompt []int32) {
	id := w.next
	w.next++
	if _, err := w.pool.Open(id, "", prompt); err != nil {
		b.Fatal(err)
	}
	if err := w.pool.Grow(id, len(prompt)); err != nil {
		b.Fatal(err)
	}
	w.pool.Commit(id, prompt)
	w.pool.Release(id)
}

// prompt returns a new traffic-shaped prompt: a system prompt and a suffix
// no other prompt has, of suffix tokens (random in range when 0).
func (w *scaleWorld) prompt(rng *rand.Rand, suffix int) []int32 {
	if suffix == 0 {
		suffix = scaleSuffixMin + rng.IntN(scaleSuffixMax-scaleSuffixMin+1)
	}
	// Suffix tokens start far above the system prompts' and never overlap
	// another suffix's: 1<<12 tokens apart is more than the longest.
	base := 1 << 30
	return Join(scaleSystem(rng.IntN(scaleSystems)), Tokens(base+w.next<<12, suffix))
}

func newScaleWorld(b *testing.B, f Factory, target int) *scaleWorld {
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: target + scaleHeadroom, BlockSize: scaleBlockSize, NewCache: f})
	if err != nil {
		b.Fatal(err)
	}
	w := &scaleWorld{pool: p, cache: p.Cache()}
	rng := rand.New(rand.NewPCG(1, uint64(target)))
	for w.cache.Stats().Blocks < target {
		pr := w.prompt(rng, 0)
		if w.hit == nil && len(pr) >= scaleHitLen {
			w.hit = pr[:scaleHitLen]
		}
		w.run(b, pr)
	}
	return w
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// ScaleBenchmarks measures, at each size in sizes, a cache filled through a
// real pool with traffic-shaped prompts (64 system prompts of 1,024 tokens,
// suffixes of 256–2,048, blocks of 16 tokens) until it holds that many
// blocks, the pool's free space being a few thousand blocks. The names
// compare across designs with benchstat:
//
//	Scale/blocks=N/Match        Match + Release of a 1,536-token cached
//	                            prompt; ns/token
//	Scale/blocks=N/Evictable    one Evictable call
//	Scale/blocks=N/Evict        Evict(64) with the pool full (refilled,
//	                            untimed, every 32 calls)
//	Scale/blocks=N/Insert       Open, Grow, Commit and Release of a new
//	                            1,024 + 1,024-token prompt whose Grow must
//	                            evict
//	Scale/blocks=N/Memory       index heap bytes per cached block (B/block)
//	                            and one full collection (GC-ms)
func ScaleBenchmarks(b *testing.B, f Factory, sizes []int) {
	for _, target := range sizes {
		b.Run("blocks="+scaleName(target), func(b *testing.B) {
			runtime.GC()
			base := heapAlloc()
			w := newScaleWorld(b, f, target)
			defer w.pool.Close()
			filled := heapAlloc()
			// The pool's KV tensors are the same for every design; count
			// them out so that the figure is the index's.
			kv := uint64(2 * (target + scaleHeadroom) * scaleBlockSize * 4)
			cached := w.cache.Stats().Blocks
			perBlock := (float64(filled) - float64(base) - float64(kv)) / float64(cached)

			b.Run("Match", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if _, got := w.cache.Match(-1-i, "", w.hit); got != scaleHitLen {
						b.Fatalf("matched %d tokens; want %d", got, scaleHitLen)
					}
					w.cache.Release(-1 - i)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/scaleHitLen, "ns/token")
			})
			b.Run("Evictable", func(b *testing.B) {
				sum := 0
				for b.Loop() {
					sum += w.cache.Evictable()
				}
				if sum < 0 {
					b.Fatal(sum)
				}
			})
			b.Run("Memory", func(b *testing.B) {
				for b.Loop() {
					runtime.GC()
				}
				b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(b.N), "GC-ms")
				b.ReportMetric(perBlock, "B/block")
			})
			rng := rand.New(rand.NewPCG(2, uint64(target)))
			b.Run("Evict", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if i%32 == 0 {
						b.StopTimer()
						for w.pool.Allocator().NumFree() >= 64 {
							w.run(b, w.prompt(rng, 1_024)) // 64 new blocks
						}
						b.StartTimer()
					}
					if got := w.cache.Evict(64); got != 64 {
						b.Fatalf("evicted %d blocks; want 64", got)
					}
				}
			})
			b.Run("Insert", func(b *testing.B) {
				for b.Loop() {
					if w.pool.Allocator().NumFree() >= 2*scaleSystemLen/scaleBlockSize {
						b.StopTimer()
						for w.pool.Allocator().NumFree() >= 64 {
							w.run(b, w.prompt(rng, 1_024))
						}
						b.StartTimer()
					}
					w.run(b, Join(Tokens(1<<29+w.next<<12, scaleSystemLen), Tokens(1<<29+w.next<<12+scaleSystemLen, scaleSystemLen)))
				}
			})
		})
	}
}

package cachetest

import (
	"fmt"
	"testing"
)

// Benchmarks runs the data-structure benchmarks every variant shares. The
// names are fixed so that runs of different variants compare with
// benchstat:
//
//	Match/tokens=N      Match + Release of a fully cached N-token prompt
//	MatchLen/tokens=N   the read-only query cost-aware admission uses
//	Insert/tokens=N     Open, Grow, Commit and Release of a new N-token
//	                    prompt sharing nothing (evicting when the pool fills)
//	Evict/blocks=N      evicting N blocks of finished sequences
//
// Match and MatchLen report ns/token; all report allocs/op.
func Benchmarks(b *testing.B, f Factory) {
	const bs = 16
	for _, n := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("Match/tokens=%d", n), func(b *testing.B) {
			h := NewHarness(b, f, 2*n/bs+8, bs)
			prompt := Tokens(0, n)
			h.Start(0, prompt)
			h.Finish(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				_, got := h.Cache.Match(i+1, "", prompt)
				if got != n {
					b.Fatalf("matched %d tokens; want %d", got, n)
				}
				h.Cache.Release(i + 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/token")
		})
		b.Run(fmt.Sprintf("MatchLen/tokens=%d", n), func(b *testing.B) {
			h := NewHarness(b, f, 2*n/bs+8, bs)
			prompt := Tokens(0, n)
			h.Start(0, prompt)
			h.Finish(0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if got := h.Cache.MatchLen("", prompt); got != n {
					b.Fatalf("matched %d tokens; want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/token")
		})
	}
	b.Run("Insert/tokens=1024", func(b *testing.B) {
		const n = 1024
		h := NewHarness(b, f, 8*n/bs, bs)
		prompt := Tokens(0, n)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			prompt[0] = int32(1_000_000 + i) // a new prompt every time
			if _, err := h.Pool.Open(i, "", prompt); err != nil {
				b.Fatal(err)
			}
			if err := h.Pool.Grow(i, n); err != nil {
				b.Fatal(err)
			}
			h.Pool.Commit(i, prompt)
			h.Pool.Release(i)
		}
	})
	b.Run("Evict/blocks=64", func(b *testing.B) {
		// Fill the pool with finished 64-block prompts, evict 64 blocks per
		// iteration, and refill (untimed) only when the cache runs dry, so
		// the setup does not dwarf what is measured.
		const n, seqs = 64 * bs, 32
		h := NewHarness(b, f, seqs*n/bs, bs)
		next := 0
		fill := func() {
			for range seqs {
				prompt := Tokens(10_000_000+next*n, n)
				if _, err := h.Pool.Open(next, "", prompt); err != nil {
					b.Fatal(err)
				}
				if err := h.Pool.Grow(next, n); err != nil {
					b.Fatal(err)
				}
				h.Pool.Commit(next, prompt)
				h.Pool.Release(next)
				next++
			}
		}
		fill()
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if h.Cache.Evictable() < 64 {
				b.StopTimer()
				fill()
				b.StartTimer()
			}
			if got := h.Cache.Evict(64); got != 64 {
				b.Fatalf("evicted %d blocks; want 64", got)
			}
		}
	})
}

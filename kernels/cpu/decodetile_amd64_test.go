//go:build amd64 && !purego

package cpu

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkDecodeOneRowTile compares three ways of running a decode row's
// bf16 products on the same weights, token by token: lanes, the set's own
// (dots4DPAVX512 through asmLanes: four lanes, each down its own quarter
// of the rows, whole cache lines, one YMM accumulator a row), quads (the
// same kernel on eight neighbouring rows at a time, rowQuads) and pairs (the pair tile run on
// the row twice, what the set did first: half a line of eight rows a
// step, every product computed twice). Each iteration times one token
// with each, the order turning, so that all three see the same moment of
// a memory bandwidth that drifts on a shared machine; "lanes/quads" and
// "lanes/pairs" are medians of the per-token speed ratios, GB/s the weight
// bytes over each kernel's total time.
func BenchmarkDecodeOneRowTile(b *testing.B) {
	if !BF16DotNative() {
		b.Skip("no AVX512-BF16: the bf16 products run in Go")
	}
	pair := asmTile(2, 8, dots2x8NextDPAVX512)
	own := kern.dp
	defer func() { kern.dp = own }()
	quads := own
	quads.rowLanes = nil
	pairs := quads
	pairs.dots1x8 = func(x []uint16, w []uint16, ldw, nb int, dst []float32) { pair(x, 0, w, ldw, nb, dst, 0) }
	ways := []dotKernels[uint16, uint16]{own, quads, pairs}
	for _, s := range decodeShapes {
		b.Run(s.name, func(b *testing.B) {
			st := newDecodeStep(s.hidden, s.q, s.kv, s.ffn, s.vocab, s.layers)
			var total [3]time.Duration
			var overQuads, overPairs []float64
			i := 0
			for b.Loop() {
				var t [3]time.Duration
				for k := range ways {
					j := (k + i) % len(ways)
					kern.dp = ways[j]
					t0 := time.Now()
					st.token()
					t[j] = time.Since(t0)
					total[j] += t[j]
				}
				overQuads = append(overQuads, t[1].Seconds()/t[0].Seconds())
				overPairs = append(overPairs, t[2].Seconds()/t[0].Seconds())
				i++
			}
			kern.dp = own
			slices.Sort(overQuads)
			slices.Sort(overPairs)
			for j, name := range []string{"lanes", "quads", "pairs"} {
				b.ReportMetric(st.bytes*float64(b.N)/total[j].Seconds()/1e9, name+"-GB/s")
			}
			b.ReportMetric(overQuads[len(overQuads)/2], "lanes/quads")
			b.ReportMetric(overPairs[len(overPairs)/2], "lanes/pairs")
		})
	}
}

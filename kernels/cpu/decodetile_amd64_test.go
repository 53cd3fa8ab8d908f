//go:build amd64 && !purego

package cpu

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkDecodeOneRowTile compares two kernels for a decode row's bf16
// products on the same weights, token by token: quads, the set's own
// (dots1x4DPAVX512 through rowQuads: four weight rows at a time, whole
// cache lines, one YMM accumulator a row), and pairs, the pair tile run on the row twice
// (what the set used before: half a line of eight rows a step, every
// product computed twice). Each iteration times one token with each, in
// turns, so that both see the same moment of a memory bandwidth that
// drifts on a shared machine; "quads/pairs" is the median of the
// per-token speed ratios, GB/s the weight bytes over the total time.
func BenchmarkDecodeOneRowTile(b *testing.B) {
	if !BF16DotNative() {
		b.Skip("no AVX512-BF16: the bf16 products run in Go")
	}
	pair := asmTile(2, 8, dots2x8NextDPAVX512)
	pairs := func(x []uint16, w []uint16, ldw, nb int, dst []float32) { pair(x, 0, w, ldw, nb, dst, 0) }
	for _, s := range decodeShapes {
		b.Run(s.name, func(b *testing.B) {
			st := newDecodeStep(s.hidden, s.q, s.kv, s.ffn, s.vocab, s.layers)
			quads := kern.dp.dots1x8
			defer func() { kern.dp.dots1x8 = quads }()
			timed := func(k func(x []uint16, w []uint16, ldw, nb int, dst []float32)) time.Duration {
				kern.dp.dots1x8 = k
				t0 := time.Now()
				st.token()
				return time.Since(t0)
			}
			var ratios []float64
			var tq, tp time.Duration
			i := 0
			for b.Loop() {
				var q, p time.Duration
				if i%2 == 0 {
					q, p = timed(quads), timed(pairs)
				} else {
					p, q = timed(pairs), timed(quads)
				}
				tq, tp = tq+q, tp+p
				ratios = append(ratios, p.Seconds()/q.Seconds())
				i++
			}
			slices.Sort(ratios)
			b.ReportMetric(st.bytes*float64(b.N)/tq.Seconds()/1e9, "quads-GB/s")
			b.ReportMetric(st.bytes*float64(b.N)/tp.Seconds()/1e9, "pairs-GB/s")
			b.ReportMetric(ratios[len(ratios)/2], "quads/pairs")
		})
	}
}

package cpu_test

import (
	"fmt"
	"testing"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// BenchmarkMatMulTFewRows times products of a few rows against weights
// that come from memory, not from the caches: a serving decode step with a
// few sequences in flight, or a prompt whose prefix is cached, streams
// every weight once for n rows. Four 2048 → 8192 bf16 matrices (32 MiB
// each, together four times a 32 MiB L3) are used in turn, as a forward
// pass goes through its layers. GB/s counts the weight bytes read.
func BenchmarkMatMulTFewRows(b *testing.B) {
	const in, out, mats = 2048, 8192, 4
	be, dot := cpu.New(), cpu.New()
	dot.SetBF16Dot(true)
	rng := newRand(1)
	ws := make([]kernels.Tensor, mats)
	for i := range ws {
		ws[i] = be.FromHostBF16(out, in, randFloats(rng, out*in))
	}
	for _, n := range []int{1, 2, 3, 4, 6, 8, 12} {
		b.Run(fmt.Sprintf("n=%d,bf16", n), func(b *testing.B) { benchFewRows(b, be, ws, n, in, out) })
		if cpu.BF16DotNative() { // bf16 products (-bf16-dot)
			b.Run(fmt.Sprintf("n=%d,bf16dot", n), func(b *testing.B) { benchFewRows(b, dot, ws, n, in, out) })
		}
	}
}

// benchFewRows times n rows through the matrices ws in turn on be.
func benchFewRows(b *testing.B, be *cpu.Backend, ws []kernels.Tensor, n, in, out int) {
	x := randTensor(be, newRand(2), n, in)
	dst := be.New(n, out)
	i := 0
	for b.Loop() {
		be.MatMulT(dst, x, ws[i%len(ws)])
		i++
	}
	reportGFLOPs(b, 2*float64(n*in*out))
	b.ReportMetric(2*float64(in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

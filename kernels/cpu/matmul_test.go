package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

func TestMatMulTMatchesNaive(t *testing.T) {
	tests := []struct{ n, in, out int }{
		{1, 1, 1},
		{1, 512, 1536},
		{3, 7, 5},
		{17, 96, 130},
		{64, 100, 64},
		{65, 257, 65},
		{130, 600, 200},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("n=%d,in=%d,out=%d", tc.n, tc.in, tc.out), func(t *testing.T) {
			b := cpu.New()
			rng := newRand(uint64(tc.n*1000 + tc.in))
			x, w := randTensor(b, rng, tc.n, tc.in), randTensor(b, rng, tc.out, tc.in)
			dst := b.New(tc.n, tc.out)
			b.MatMulT(dst, x, w)

			want := naiveMatMulT(cpu.Data(x), cpu.Data(w), tc.n, tc.in, tc.out)
			// A float32 dot product of length in with terms in [-1, 1]
			// carries an error of order sqrt(in)·2⁻²⁴.
			tol := 4e-7 * math.Sqrt(float64(tc.in))
			requireClose(t, cpu.Data(dst), want, tol, "dst")
		})
	}
}

// TestMatMulTBatchInvariant checks the core contract bit for bit: a row's
// output does not depend on how many rows share the call, where the row sits
// in it, or how many goroutines run it.
func TestMatMulTBatchInvariant(t *testing.T) {
	const rows = 300
	ins := []int{1, 7, 64, 65, 96, 100, 300, 513}
	outs := []int{1, 3, 64, 100, 130, 200, 257}
	batches := []struct{ from, n int }{
		{0, 1}, {137, 1}, {299, 1}, {0, 2}, {5, 63}, {1, 64}, {3, 65},
		{0, 128}, {137, 100}, {11, 289}, {0, 300},
	}
	b := cpu.New()
	serial := cpu.NewWithWorkers(1)
	wide := cpu.NewWithWorkers(7)
	for _, in := range ins {
		for _, out := range outs {
			t.Run(fmt.Sprintf("in=%d,out=%d", in, out), func(t *testing.T) {
				rng := newRand(uint64(in*7919 + out))
				x, w := randTensor(b, rng, rows, in), randTensor(b, rng, out, in)
				full := b.New(rows, out)
				b.MatMulT(full, x, w)
				want := cpu.Data(full)

				for _, bt := range batches {
					for name, be := range map[string]*cpu.Backend{"default": b, "serial": serial, "wide": wide} {
						dst := be.New(bt.n, out)
						be.MatMulT(dst, be.View(x, bt.from, bt.n), w)
						requireBitEqual(t, cpu.Data(dst), want[bt.from*out:(bt.from+bt.n)*out],
							fmt.Sprintf("%s rows [%d,%d)", name, bt.from, bt.from+bt.n))
					}
				}
			})
		}
	}
}

// TestWholeSgemmBatchVariance records why MatMulT does not hand the product
// to a general-purpose BLAS: gonum's Sgemm on the whole product changes its
// reduction order with the batch size whenever the output is narrow enough
// for a lone row to stay on gonum's serial path. It only logs, so a future
// gonum that changes its blocking does not break the build.
func TestWholeSgemmBatchVariance(t *testing.T) {
	const n, in, out = 300, 96, 128
	rng := newRand(1)
	x, w := randFloats(rng, n*in), randFloats(rng, out*in)
	gemm := func(rows int) []float32 {
		c := make([]float32, rows*out)
		blas32.Implementation().Sgemm(blas.NoTrans, blas.Trans, rows, out, in, 1, x, in, w, in, 0, c, out)
		return c
	}
	full, single := gemm(n), gemm(1)
	differ := 0
	for j := range out {
		if math.Float32bits(full[j]) != math.Float32bits(single[j]) {
			differ++
		}
	}
	t.Logf("whole-matrix Sgemm, in=%d out=%d: row 0 differs in %d of %d columns between n=1 and n=%d", in, out, differ, out, n)
}

func TestMatMulTShapeMismatchPanics(t *testing.T) {
	b := cpu.New()
	require.Panics(t, func() { b.MatMulT(b.New(2, 3), b.New(2, 4), b.New(3, 5)) })
	require.Panics(t, func() { b.MatMulT(b.New(2, 4), b.New(2, 4), b.New(3, 4)) })
}

// TestMatMulTBF16 checks a bf16 weight: the product has the same bits as
// with the widened float32 weight, for any batch, and Embed, View and
// ToHost read the widened values.
func TestMatMulTBF16(t *testing.T) {
	b := cpu.New()
	for _, s := range []struct{ n, in, out int }{{1, 256, 100}, {7, 64, 9}, {65, 517, 130}} {
		rng := newRand(uint64(s.in))
		wf := randFloats(rng, s.out*s.in)
		wh := b.FromHostBF16(s.out, s.in, wf)
		require.True(t, cpu.IsBF16(wh))
		widened := b.ToHost(wh, make([]float32, s.out*s.in))
		for i, v := range widened {
			require.InDelta(t, wf[i], v, 0.004*math.Abs(float64(wf[i])), "bf16 rounding of %d", i)
		}
		w32 := b.FromHost(s.out, s.in, widened)
		x := randTensor(b, rng, s.n, s.in)
		want, have := b.New(s.n, s.out), b.New(s.n, s.out)
		b.MatMulT(want, x, w32)
		b.MatMulT(have, x, wh)
		requireBitEqual(t, cpu.Data(have), cpu.Data(want), "bf16 against widened f32")
		for r := range s.n {
			one := b.New(1, s.out)
			b.MatMulT(one, b.View(x, r, 1), wh)
			requireBitEqual(t, cpu.Data(one), cpu.Data(want)[r*s.out:(r+1)*s.out], fmt.Sprintf("row %d alone", r))
		}

		ids := []int32{int32(s.out - 1), 0, 3 % int32(s.out)}
		emb := b.New(len(ids), s.in)
		b.Embed(emb, wh, ids)
		for r, id := range ids {
			requireBitEqual(t, cpu.Data(emb)[r*s.in:(r+1)*s.in], widened[int(id)*s.in:(int(id)+1)*s.in], "Embed")
		}
		last := b.View(wh, s.out-1, 1)
		require.True(t, cpu.IsBF16(last))
		requireBitEqual(t, b.ToHost(last, make([]float32, s.in)), widened[(s.out-1)*s.in:], "View")
	}
	require.Panics(t, func() { b.Add(b.FromHostBF16(1, 2, []float32{1, 2}), b.New(1, 2)) })
}

// TestMatMulTManyMatchesMatMulT checks that products batched into one
// hand-off give the bits of one MatMulT each, for a decode row and a
// prefill chunk, float32 and bf16 weights of different widths.
func TestMatMulTManyMatchesMatMulT(t *testing.T) {
	for _, n := range []int{1, 7, 100} {
		for _, workers := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("n=%d,workers=%d", n, workers), func(t *testing.T) {
				b := cpu.NewWithWorkers(workers)
				rng := newRand(uint64(n*10 + workers))
				const in = 72
				x := randTensor(b, rng, n, in)
				ws := []kernels.Tensor{
					randTensor(b, rng, 96, in),
					randTensor(b, rng, 24, in),
					b.FromHostBF16(40, in, randFloats(rng, 40*in)),
				}
				var ps []kernels.Product
				for _, w := range ws {
					ps = append(ps, kernels.Product{Dst: b.New(n, w.Rows()), W: w})
				}
				b.MatMulTMany(x, ps)
				for i, p := range ps {
					want := b.New(n, p.W.Rows())
					b.MatMulT(want, x, p.W)
					requireBitEqual(t, cpu.Data(p.Dst), cpu.Data(want), fmt.Sprintf("product %d", i))
				}
			})
		}
	}
}

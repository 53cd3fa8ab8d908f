//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tensor-core kernels round x and w to bfloat16 (8 significant bits), so
// each product x_k·w_k carries a relative error of up to 2^-8 ≈ 0.4%: with
// round-to-nearest on both inputs its standard deviation is about
// 0.32% of |x_k·w_k|, and those errors add up like a random walk. Two
// checks follow from that:
//
//   - per element, |gpu - exact| <= matmulElemTol · sqrt(Σ_k (x_k·w_k)²),
//     about 9 standard deviations. Losing one 32-wide K step of a 2048-long
//     product, or reading a neighbouring row, is 5 to 50 times larger;
//   - over the whole output, ‖gpu - exact‖ / ‖exact‖ <= matmulNormTol.
const (
	matmulElemTol = 3e-2
	matmulNormTol = 1e-2
)

// checkMatMul compares dst (n×out) with x·wᵀ computed in float64.
func checkMatMul(t *testing.T, have, x, w []float32, n, in, out int, what string) {
	t.Helper()
	var errSq, refSq float64
	bad := 0
	for i := range n {
		for j := range out {
			var dot, mag float64
			for k := range in {
				p := float64(x[i*in+k]) * float64(w[j*in+k])
				dot += p
				mag += p * p
			}
			d := float64(have[i*out+j]) - dot
			errSq += d * d
			refSq += dot * dot
			if !(math.Abs(d) <= matmulElemTol*math.Sqrt(mag)+1e-6) {
				if bad < 5 {
					t.Errorf("%s [%d,%d]: gpu %v, exact %v (diff %.3g, allowed %.3g)",
						what, i, j, have[i*out+j], dot, d, matmulElemTol*math.Sqrt(mag))
				}
				bad++
			}
		}
	}
	if refSq > 0 {
		recordErr("MatMulT", n*out, math.Sqrt(errSq/refSq), matmulNormTol, "normwise ‖gpu−exact‖/‖exact‖ (f64 exact product)")
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements out of tolerance", what, bad, n*out)
	}
	if refSq > 0 && math.Sqrt(errSq/refSq) > matmulNormTol {
		t.Fatalf("%s: normwise relative error %.3g > %g", what, math.Sqrt(errSq/refSq), matmulNormTol)
	}
}

func TestMatMulT(t *testing.T) {
	be := needGPU(t)
	rng := newRand(11)
	cases := []struct{ n, in, out int }{
		{1, 64, 48},
		{1, 2048, 512},  // a decode-step k/v projection of Llama-3.2-1B
		{5, 37, 19},     // nothing a multiple of anything: scalar loads, ragged edges
		{16, 300, 130},  // the largest skinny product
		{17, 96, 130},   // the smallest tiled one
		{200, 256, 300}, // several tiles in both directions
		{513, 130, 257},
		{64, 8192, 64}, // a long reduction
	}
	for _, c := range cases {
		for _, v := range []matmulVariant{matmulAuto, matmulSkinny, matmulTile64, matmulTile128} {
			if v == matmulSkinny && c.n > 16 {
				continue
			}
			t.Run(fmt.Sprintf("%dx%dx%d/%s", c.n, c.in, c.out, v), func(t *testing.T) {
				be.forceMatmul = v
				defer func() { be.forceMatmul = matmulAuto }()
				x := randFloats(rng, c.n*c.in, 1)
				w := randFloats(rng, c.out*c.in, 1)
				xt, wt, dt := be.FromHost(c.n, c.in, x), be.FromHost(c.out, c.in, w), be.New(c.n, c.out)
				be.MatMulT(dt, xt, wt)
				checkMatMul(t, be.ToHost(dt, make([]float32, c.n*c.out)), x, w, c.n, c.in, c.out, "MatMulT")
				be.Free(xt)
				be.Free(wt)
				be.Free(dt)
			})
		}
	}
}

// TestMatMulTOnViews multiplies a row view at an odd offset of a larger
// tensor, as the model does with its scratch buffers, into another view.
func TestMatMulTOnViews(t *testing.T) {
	be := needGPU(t)
	rng := newRand(12)
	const rows, in, out, from, n = 40, 36, 20, 7, 25
	x := randFloats(rng, rows*in, 1)
	w := randFloats(rng, out*in, 1)
	xt, wt, dt := be.FromHost(rows, in, x), be.FromHost(out, in, w), be.New(rows, out)
	be.MatMulT(be.View(dt, from, n), be.View(xt, from, n), wt)
	all := be.ToHost(dt, make([]float32, rows*out))
	checkMatMul(t, all[from*out:(from+n)*out], x[from*in:(from+n)*in], w, n, in, out, "MatMulT on views")
	for i, v := range all {
		if (i < from*out || i >= (from+n)*out) && v != 0 {
			t.Fatalf("MatMulT wrote outside its view, at element %d", i)
		}
	}
	be.Free(xt)
	be.Free(wt)
	be.Free(dt)
}

func TestMatMulTEmptyInner(t *testing.T) {
	be := needGPU(t)
	d := be.FromHost(2, 3, []float32{1, 2, 3, 4, 5, 6})
	be.MatMulT(d, be.New(2, 0), be.New(3, 0))
	if got := be.ToHost(d, make([]float32, 6)); fmt.Sprint(got) != "[0 0 0 0 0 0]" {
		t.Fatalf("x·wᵀ with 0 inner columns = %v, want zeros", got)
	}
	requirePanics(t, "shape mismatch", func() { be.MatMulT(d, be.New(2, 4), be.New(3, 5)) })
}

func (v matmulVariant) String() string {
	return [...]string{"auto", "skinny", "tile64", "tile128"}[v]
}

// TestMatMulTBatchInvariant checks that a row's product does not depend on
// the rows computed with it: for every batch size from 1 to 64 and every
// kernel that may run at that size, each row of the result holds the same
// bits as the row computed alone. This is what lets the engine batch
// requests without changing any request's tokens.
//
// The emulator runs each 16×16×16 MMA as one fused step (see emu/mma.h), so
// this fails for a kernel whose K steps, partial sums or folding order
// change with the number of rows, as the 8-warp split of the skinny kernel
// once did while the tiled kernels summed K in one sequence. It cannot
// show that the tensor core's result for one row is independent of the
// other rows of its tile; the MMA's definition promises that.
func TestMatMulTBatchInvariant(t *testing.T) {
	be := needGPU(t)
	rng := newRand(13)
	const maxRows = 64
	for _, s := range []struct {
		in, out int
		sizes   []int // batch sizes; nil for all of 1 to 64
	}{
		{100, 40, nil}, // ragged K and columns, scalar loads, one K slice
		{520, 24, nil}, // float4 loads, 4 slices of 5 chunks
		{1040, 20, []int{1, 2, 3, 7, 15, 16, 17, 31, 33, 64}}, // 7 slices, the last one short
	} {
		t.Run(fmt.Sprintf("in=%d/out=%d", s.in, s.out), func(t *testing.T) {
			xt := be.FromHost(maxRows, s.in, randFloats(rng, maxRows*s.in, 1))
			wt := be.FromHost(s.out, s.in, randFloats(rng, s.out*s.in, 1))
			dt := be.New(maxRows, s.out)
			defer func() { be.Free(xt); be.Free(wt); be.Free(dt) }()
			// Each row alone, with the kernel MatMulT picks for one row.
			alone := make([][]uint32, maxRows)
			for i := range maxRows {
				be.MatMulT(be.View(dt, i, 1), be.View(xt, i, 1), wt)
				alone[i] = bitsOf(be.ToHost(be.View(dt, i, 1), make([]float32, s.out)))
			}
			sizes := s.sizes
			if sizes == nil {
				for n := 1; n <= maxRows; n++ {
					sizes = append(sizes, n)
				}
			}
			for _, n := range sizes {
				for _, v := range []matmulVariant{matmulAuto, matmulSkinny, matmulTile64, matmulTile128} {
					if v == matmulSkinny && n > 16 {
						continue
					}
					be.forceMatmul = v
					be.MatMulT(be.View(dt, 0, n), be.View(xt, 0, n), wt)
					be.forceMatmul = matmulAuto
					got := be.ToHost(be.View(dt, 0, n), make([]float32, n*s.out))
					for i := range n {
						require.Equal(t, alone[i], bitsOf(got[i*s.out:(i+1)*s.out]),
							"row %d of a %d-row product (%s kernel) differs from the row alone", i, n, v)
					}
				}
			}
		})
	}
}

// bitsOf returns the bit patterns of v, so that a comparison tells -0 from
// +0 and compares NaNs.
func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

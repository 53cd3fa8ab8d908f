package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
)

// amxSet returns the amx kernel set, or skips the test where this CPU
// (or this process's permission) has no AMX.
func amxSet(t *testing.T) *kernelSet {
	t.Helper()
	for _, ks := range runnable {
		if ks.tiles {
			return ks
		}
	}
	t.Skip("no AMX tiles on this CPU")
	return nil
}

// sameFloat is bit equality, any NaN matching any NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestAMXInstruction checks, on this CPU, that TDPBF16PS is amxdot.go's
// steps 1 and 2: one to three blocks of 32 elements through the 2×2
// kernel, over random bits (NaNs, infinities and subnormals among them)
// and values of every scale. The two sums of a block, their order and
// the flushing are the definition's; a CPU that did any of them
// differently fails here (bf16dot.go's single sum, applied to these
// blocks, fails it: TestAMXIsNotBF16Dot).
func TestAMXInstruction(t *testing.T) {
	amxSet(t)
	rng := rand.New(rand.NewPCG(21, 22))
	bf := func(scale int) uint16 {
		switch rng.IntN(8) {
		case 0:
			return uint16(rng.Uint32())
		case 1:
			return uint16(rng.IntN(0x100)) | uint16(rng.IntN(2))<<15 // zero or subnormal
		}
		return roundBF16(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(2*scale+1)-scale)))
	}
	for it := range 300 {
		kb := 1 + it%3
		in := 32 * kb
		scale := 1 + it%40
		w := make([]uint16, 32*in)
		xb := make([]uint16, 32*in)
		for i := range w {
			w[i], xb[i] = bf(scale), bf(scale)
		}
		xp := make([]uint16, packedLen(32, in))
		for j := range 2 {
			packX(xp, xb, 32, in, j)
		}
		var out [1024]float32
		cfg := newTileConfig(16, 16)
		tile2x2AMX(&cfg, &w[0], 2*in, &xp[0], kb, &out[0])
		for tile := range 4 {
			for n := range 16 {
				for m := range 16 {
					c, r := 16*(tile/2)+n, 16*(tile%2)+m
					want := tileDotGo(0, xb[r*in:(r+1)*in], w[c*in:(c+1)*in], 0)
					have := out[tile*256+n*16+m]
					if !sameFloat(have, want) {
						t.Fatalf("iteration %d, weight row %d, x row %d: have %v (%08x); want %v (%08x)",
							it, c, r, have, math.Float32bits(have), want, math.Float32bits(want))
					}
				}
			}
		}
	}
}

// TestAMXIsNotBF16Dot shows why the amx set has a definition of its own:
// over ordinary values, bf16dot.go's order and amxdot.go's give other
// bits for a good share of the outputs.
func TestAMXIsNotBF16Dot(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	differ := 0
	const n = 2000
	for range n {
		x, w := make([]uint16, 64), make([]uint16, 64)
		for i := range x {
			x[i] = roundBF16(float32(rng.NormFloat64()))
			w[i] = roundBF16(float32(rng.NormFloat64()))
		}
		if !sameFloat(tileDotGo(0, x, w, 0), dpRef(x, w)) {
			differ++
		}
	}
	require.Greater(t, differ, n/10, "the two orders agree on %d of %d", n-differ, n)
}

// TestAMXMatMulT checks MatMulT and MatMulTMany on the amx set against the
// definition, bit for bit, over shapes that reach every path: one row
// (decode), fewer than sixteen, an odd block of sixteen, several chunks;
// products with a tail shorter than 32, an odd length and one shorter
// than a block; a panel short of 32 weight rows; 1 to 3 workers. A row
// alone gives the bits it gives in the batch.
func TestAMXMatMulT(t *testing.T) {
	ks := amxSet(t)
	defer func(k kernelSet) { kern = k }(kern)
	kern = *ks
	rng := rand.New(rand.NewPCG(25, 26))
	for _, sh := range []struct{ n, in, out int }{
		{1, 64, 64}, {3, 96, 96}, {16, 64, 32}, {2, 128, 64}, {9, 256, 96}, {1, 128, 1000}, {4, 64, 600}, {1, 96, 8}, {1, 256, 4000}, {3, 128, 200}, {3, 128, 1024}, {16, 64, 2048}, {17, 100, 64}, {40, 33, 45}, {150, 128, 96}, {290, 64, 64}, {5, 7, 40},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d", sh.n, sh.in, sh.out), func(t *testing.T) {
			x, wf, xb, wh := bf16Operands(rng, sh.n, sh.in, sh.out)
			want := make([]float32, sh.n*sh.out)
			for r := range sh.n {
				for c := range sh.out {
					want[r*sh.out+c] = tileDotGo(0, xb[r*sh.in:(r+1)*sh.in], wh[c*sh.in:(c+1)*sh.in], 0)
				}
			}
			for _, workers := range []int{1, 2, 3} {
				b := NewWithWorkers(workers)
				b.SetBF16Dot(true)
				xt, wt := b.FromHost(sh.n, sh.in, x), b.FromHostBF16(sh.out, sh.in, wf)
				dst := b.New(sh.n, sh.out)
				b.MatMulT(dst, xt, wt)
				require.Equal(t, want, dst.(*Tensor).Data, "workers %d: MatMulT", workers)
				for _, r := range []int{0, sh.n / 2, sh.n - 1} {
					d1 := b.New(1, sh.out)
					b.MatMulT(d1, b.View(xt, r, 1), wt)
					require.Equal(t, want[r*sh.out:(r+1)*sh.out], d1.(*Tensor).Data, "workers %d: row %d alone", workers, r)
				}
				d2, d3 := b.New(sh.n, sh.out), b.New(sh.n, sh.out)
				b.MatMulTMany(xt, []kernels.Product{{Dst: d2, W: wt}, {Dst: d3, W: wt}})
				require.Equal(t, want, d2.(*Tensor).Data, "workers %d: MatMulTMany, first", workers)
				require.Equal(t, want, d3.(*Tensor).Data, "workers %d: MatMulTMany, second", workers)
			}
		})
	}
}

// TestAMXAccuracy is TestBF16DotAccuracy for amxdot.go's order: within
// 2⁻⁸·Σ|x·w| of the exact product, at the sizes of real rows.
func TestAMXAccuracy(t *testing.T) {
	requireNearExact(t, rand.New(rand.NewPCG(27, 28)), []int{1152, 2048, 8192, 9728},
		func(xb, w []uint16) float32 { return tileDotGo(0, xb, w, 0) })
}

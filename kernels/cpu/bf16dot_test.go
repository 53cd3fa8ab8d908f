package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
)

// dpRef is one output element of a bf16 product by bf16dot.go's definition,
// steps 1-3, on a row already rounded to bf16.
func dpRef(xb, w []uint16) float32 {
	nb := len(xb) / 16
	return dotTail(dpGo(xb, w, nb), xb, w, 16*nb)
}

// TestBF16DotKernels checks every kernel set's bf16 products against the
// definition, element by element and bit for bit, over shapes that reach
// every tile (6×8, 2×8, one row, columns short of eight, a tail shorter
// than sixteen), with the Go rounding of x as step 0.
func TestBF16DotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, rows := range []int{1, 2, 3, 7, 8, 13} {
		for _, in := range []int{16, 40, 48, 64, 200} {
			for _, cols := range []int{8, 13, 24} {
				x := make([]float32, rows*in)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				w := make([]uint16, cols*in)
				for i := range w {
					w[i] = kernels.F32ToBF16(float32(rng.NormFloat64()))
				}
				xb := make([]uint16, len(x))
				toBF16Go(xb, x)
				want := make([]float32, rows*cols)
				for r := range rows {
					for c := range cols {
						want[r*cols+c] = dpRef(xb[r*in:(r+1)*in], w[c*in:(c+1)*in])
					}
				}
				for _, ks := range runnable {
					xk := make([]uint16, len(x))
					ks.toBF16(xk, x)
					require.Equal(t, xb, xk, "%s: toBF16", ks.name)
					tiles := map[string]dotKernels[uint16, uint16]{"all": ks.dp}
					pairs := ks.dp
					pairs.dots6x8, pairs.next6x8 = nil, nil
					tiles["2×8"] = pairs
					rows8 := ks.dp // a single row eight columns at a time
					rows8.rowLanes = nil
					tiles["1×8"] = rows8
					for tn, k := range tiles {
						have := make([]float32, rows*cols)
						matMulBlock(&k, have, cols, xk, w, in, 0, rows, 0, cols)
						for i := range want {
							if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%d×%d·(%d×%d)ᵀ, %s %s tiles: element %d have %v; want %v", rows, in, cols, in, ks.name, tn, i, have[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestBF16DotMatMulT checks the backend's switch: with BF16Dot on, MatMulT
// and MatMulTMany give the definition's bits for bf16 weights, at any
// number of workers and whether a row comes alone or in a batch, and leave
// float32 weights' products as they were; with it off, bf16 weights give
// dot.go's bits. It runs the fastest set without AMX tiles: the amx
// set's bf16 products follow amxdot.go (TestAMXMatMulT).
func TestBF16DotMatMulT(t *testing.T) {
	defer func(k kernelSet) { kern = k }(kern)
	for _, ks := range runnable {
		if !ks.tiles {
			kern = *ks
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const n, in, out = 50, 96, 72 // two row blocks, two column blocks, column-major jobs
	x, wf, xb, wh := bf16Operands(rng, n, in, out)
	want := make([]float32, n*out)
	for r := range n {
		for c := range out {
			want[r*out+c] = dpRef(xb[r*in:(r+1)*in], wh[c*in:(c+1)*in])
		}
	}
	for _, workers := range []int{1, 2, 3} {
		b := NewWithWorkers(workers)
		b.SetBF16Dot(true)
		xt := b.FromHost(n, in, x)
		wt := b.FromHostBF16(out, in, wf)
		w32 := b.FromHost(out, in, wf)
		dst := b.New(n, out)
		b.MatMulT(dst, xt, wt)
		require.Equal(t, want, dst.(*Tensor).Data, "workers %d: MatMulT", workers)
		// Row by row (decode's shape) and through MatMulTMany.
		for r := range n {
			row, d1 := b.View(xt, r, 1), b.New(1, out)
			b.MatMulT(d1, row, wt)
			require.Equal(t, want[r*out:(r+1)*out], d1.(*Tensor).Data, "workers %d: row %d alone", workers, r)
		}
		d2, d3 := b.New(n, out), b.New(n, out)
		b.MatMulTMany(xt, []kernels.Product{{Dst: d2, W: wt}, {Dst: d3, W: w32}})
		require.Equal(t, want, d2.(*Tensor).Data, "workers %d: MatMulTMany", workers)
		// float32 weights: dot.go's product, BF16Dot or not.
		plain := NewWithWorkers(workers)
		d4 := plain.New(n, out)
		plain.MatMulT(d4, plain.FromHost(n, in, x), plain.FromHost(out, in, wf))
		require.Equal(t, d4.(*Tensor).Data, d3.(*Tensor).Data, "workers %d: float32 weights", workers)
		// bf16 weights with BF16Dot off: the float32 widening's bits.
		d5 := plain.New(n, out)
		plain.MatMulT(d5, plain.FromHost(n, in, x), plain.FromHostBF16(out, in, wf))
		require.Equal(t, d4.(*Tensor).Data, d5.(*Tensor).Data, "workers %d: BF16Dot off", workers)
		require.NotEqual(t, d5.(*Tensor).Data, dst.(*Tensor).Data, "workers %d: BF16Dot changed nothing", workers)
	}
}

// bf16Operands draws the operands of an n×in · (out×in)ᵀ bf16 product:
// x, weights wf that are exactly bf16 values (as float32), x rounded to
// bf16 (xb) and the weights' bf16 bits (wh).
func bf16Operands(rng *rand.Rand, n, in, out int) (x, wf []float32, xb, wh []uint16) {
	x = make([]float32, n*in)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	wf = make([]float32, out*in)
	for i := range wf {
		wf[i] = kernels.BF16ToF32(kernels.F32ToBF16(float32(rng.NormFloat64()) / 8))
	}
	xb = make([]uint16, len(x))
	toBF16Go(xb, x)
	wh = make([]uint16, len(wf))
	for i, f := range wf {
		wh[i] = kernels.F32ToBF16(f)
	}
	return x, wf, xb, wh
}

// requireNearExact holds a definition of bf16 products, dot, to within
// 2⁻⁸·Σ|x·w| of the exact product (float64, unrounded x), for one row of
// each length in ins.
func requireNearExact(t *testing.T, rng *rand.Rand, ins []int, dot func(xb, w []uint16) float32) {
	t.Helper()
	for _, in := range ins {
		x := make([]float32, in)
		w := make([]uint16, in)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			w[i] = kernels.F32ToBF16(float32(rng.NormFloat64()) / 32)
		}
		xb := make([]uint16, in)
		toBF16Go(xb, x)
		var exact, mag float64
		for i := range x {
			p := float64(x[i]) * float64(kernels.BF16ToF32(w[i]))
			exact += p
			mag += math.Abs(p)
		}
		have := float64(dot(xb, w))
		require.LessOrEqual(t, math.Abs(have-exact), mag/256, "in %d: have %v; exact %v", in, have, exact)
	}
}

// TestBF16DotAccuracy bounds what rounding the activations costs: each
// element is within 2⁻⁸·Σ|x·w| of the exact product (float64, unrounded
// x), the bound of one bf16 rounding (2⁻⁹ relative) per term plus the
// float32 sums, at the sizes of real hidden and FFN rows.
func TestBF16DotAccuracy(t *testing.T) {
	requireNearExact(t, rand.New(rand.NewPCG(9, 10)), []int{1152, 2048, 8192}, dpRef)
}

// TestRoundBF16 checks step 0 on the values whose handling is chosen, not
// inherited: ties, subnormals, infinities and NaN.
func TestRoundBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f808000, 0x3f80}, // tie, even below: stays
		{0x3f818000, 0x3f82}, // tie, odd below: rounds up
		{0x3f808001, 0x3f81}, // above the tie
		{0x00400000, 0x0000}, // subnormal: +0
		{0x80400000, 0x8000}, // subnormal: -0
		{0x7f800000, 0x7f80}, // +Inf
		{0x7f7fffff, 0x7f80}, // the largest float32 rounds to +Inf
		{0xff800001, 0xffc0}, // signalling NaN: quiet, sign kept
		{0x7fc00000, 0x7fc0}, // quiet NaN
	} {
		t.Run(fmt.Sprintf("%08x", c.in), func(t *testing.T) {
			have := roundBF16(math.Float32frombits(c.in))
			require.Equal(t, c.want, have, "have %04x; want %04x", have, c.want)
		})
	}
}

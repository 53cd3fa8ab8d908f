package cpu

import (
	"math"
	"sync"

	"kvlab/kernels"
)

// bf16 products: the second definition of a MatMulT output element, for
// bf16 weights, used when the backend's BF16Dot is on (off by default).
//
// dot.go's definition widens a bf16 weight to float32 and multiplies it by
// the float32 activation: a bf16 checkpoint gives exactly the bits of its
// float32 widening. CPUs with AVX512-BF16 multiply bf16 by bf16 in one
// instruction (VDPBF16PS) that does two products per float32 lane, twice
// the work of a float32 FMA, and llama.cpp runs bf16 weights that way:
// it rounds the activations to bf16 first. This definition does the same,
// fixed to the bit so that every kernel set agrees:
//
//  0. The row of x is rounded to bf16 (toBF16): to nearest, ties to even;
//     a subnormal becomes a zero of its sign; a NaN stays a NaN.
//  1. Eight lane sums s[0..7] start at +0. For each full group of sixteen
//     (k0 = 0, 16, 32, … while k0+16 ≤ k), lane l takes the pair of
//     elements i = k0+2l+1, then i = k0+2l: s[l] = dpStep(s[l], x[i], w[i]),
//     which adds the product (exact in float32) to the sum, rounded once to
//     nearest even, reading any subnormal input (s, x[i] or w[i]) as zero
//     and writing a subnormal result as a zero of its sign. That is one lane
//     of VDPBF16PS as Intel defines it; TestBF16DotInstruction checks the
//     CPU it runs on against dpStep.
//  2. The lanes are added by dot.go's tree.
//  3. The last k mod 16 terms are added in index order, r = fma(x[i], w[i], r),
//     as dot.go's step 3 does (no flushing).
//
// As in dot.go, nothing depends on the batch, the tiling or the thread, so
// a row gives the same bits alone or in any batch, with or without a
// prefix cache. What changes is the value: each activation loses 16 bits
// of mantissa, a relative error of up to 2⁻⁹, so a product moves by up to
// about 2⁻⁸ of Σ|x·w| (TestBF16DotAccuracy) and a model's logits by about
// 1 % of their norm (TestBF16DotParity, in phase08).

// dpStep is one half of a lane's step 1: s + x·w with VDPBF16PS's
// rounding and flushing. The product of two bf16 values is exact in
// float64 and the sum of it and a float32 rounded to float64 and then to
// float32 is the sum rounded once to float32 (53 ≥ 2·24+2 bits), so no
// fused arithmetic is needed.
func dpStep(s float32, x, w uint16) float32 {
	p := float64(bf16DAZ(x)) * float64(bf16DAZ(w))
	return flushSubnormal(float32(float64(flushSubnormal(s)) + p))
}

// bf16DAZ widens a bf16, reading a subnormal as a zero of its sign.
func bf16DAZ(h uint16) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return kernels.BF16ToF32(h)
}

// flushSubnormal returns f, or a zero of its sign when f is subnormal.
func flushSubnormal(f float32) float32 {
	if b := math.Float32bits(f); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return f
}

// roundBF16 is step 0 for one value, as VCVTNEPS2BF16 does it:
// kernels.F32ToBF16, except that a subnormal becomes a zero of its sign.
func roundBF16(f float32) uint16 {
	if u := math.Float32bits(f); u&0x7f800000 == 0 {
		return uint16(u>>16) & 0x8000
	}
	return kernels.F32ToBF16(f)
}

// toBF16Go is step 0 over a row: dst[i] = roundBF16(src[i]).
func toBF16Go(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = roundBF16(f)
	}
}

// dpGo is steps 1 and 2 over nb groups of sixteen.
func dpGo(x, w []uint16, nb int) float32 {
	x, w = x[:16*nb], w[:16*nb]
	var s [8]float32
	for k := 0; k < len(x); k += 16 {
		xs, ws := x[k:k+16:k+16], w[k:k+16:k+16]
		for l := range 8 {
			s[l] = dpStep(s[l], xs[2*l+1], ws[2*l+1])
			s[l] = dpStep(s[l], xs[2*l], ws[2*l])
		}
	}
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

// goDPKernels are the bf16 product kernels in Go, the definition every
// other set's dp kernels are tested against.
var goDPKernels = goTiles(dpGo)

// groupLen is the number of elements of x and w one step of the dot product
// covers: eight float32 lanes (dot.go), or eight lanes of bf16 pairs.
func groupLen[X float32 | uint16]() int {
	var x X
	if _, ok := any(x).(uint16); ok {
		return 16
	}
	return 8
}

// BF16DotNative reports whether this process's kernel set runs bf16
// products with the CPU's bf16 dot-product instruction (AVX512-BF16).
// Elsewhere they run in Go: the same bits, many times slower, so the
// runnables refuse -bf16-dot there instead of crawling.
func BF16DotNative() bool { return kern.dpNative }

// SetBF16Dot turns bf16 products on or off: with on, MatMulT multiplies
// bf16 weights by activations rounded to bf16 (the definition above)
// instead of by float32 activations (dot.go). Products with float32
// weights are unchanged. Set it before the backend computes anything.
func (b *Backend) SetBF16Dot(on bool) { b.bf16Dot = on }

// BF16Dot reports whether bf16 products are on.
func (b *Backend) BF16Dot() bool { return b.bf16Dot }

// bf16Rows are the rows of one MatMulT's x rounded to bf16 (step 0),
// pooled so that decode steps do not allocate.
var bf16Rows sync.Pool // *[]uint16

// pooledUint16 returns a buffer of n elements from pool, a new one where
// the pool has none that large; the caller gives it back with pool.Put.
func pooledUint16(pool *sync.Pool, n int) *[]uint16 {
	buf, _ := pool.Get().(*[]uint16)
	if buf == nil || cap(*buf) < n {
		s := make([]uint16, n)
		buf = &s
	}
	*buf = (*buf)[:n]
	return buf
}

// roundRows returns x rounded to bf16 in a pooled buffer, which the caller
// gives back with bf16Rows.Put. Large inputs are split across the workers
// (rowChunks).
func (b *Backend) roundRows(x *Tensor) *[]uint16 {
	buf := pooledUint16(&bf16Rows, len(x.Data))
	dst := *buf
	b.rowChunks(x, func(lo, hi int) { kern.toBF16(dst[lo:hi], x.Data[lo:hi]) })
	return buf
}

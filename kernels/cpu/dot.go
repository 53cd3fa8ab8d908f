package cpu

import (
	"math"
	"os"

	"kvlab/kernels"
)

// The dot product behind every MatMulT output element.
//
// An output element is the dot product of a row of x with a row of w, both
// k long. Its value is defined by one fixed order of operations, the same
// for every kernel below, on every machine:
//
//  1. Eight lane sums s[0..7] start at +0. For each full group of eight
//     (k0 = 0, 8, 16, … while k0+8 ≤ k), lane l does
//     s[l] = fma(x[k0+l], w[k0+l], s[l]): one fused multiply-add, rounded
//     once to float32.
//  2. The lanes are added pairwise in a fixed tree:
//     r = ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)).
//  3. The last k mod 8 terms are added in index order: r = fma(x[i], w[i], r).
//
// Nothing in that order depends on how many rows x has, where a row sits
// among them, or how the output is split into tiles and goroutines, so a
// row's result is the same bits alone or in any batch. Step 1 is exactly
// what eight lanes of an AVX2 register do with VFMADD231PS, and step 2 is
// the usual extract/shuffle/add horizontal sum, so the assembly kernels in
// dot_amd64.s follow the definition instruction for instruction. The Go
// kernels in this file follow it too, emulating the single-rounding float32
// fma exactly (fmaf), so the fallback on other architectures (or with the
// purego build tag) produces the same bits as the assembly, only slower.

// dotKernels holds the three shapes of dot-product kernels MatMulT uses,
// for weights held as W: float32, or uint16 holding bfloat16 bits that the
// kernels widen to float32 (exactly: a bf16 is the top half of a float32)
// before they multiply. Each computes whole dot products over the first
// 8*nb elements (steps 1 and 2); the caller adds the tail (step 3).
//
//	dots6x8: dst[i*ldd+j] = dot(x[i*ldx:], w[j*ldw:]) for i < 6, j < 8
//	dots2x8: the same for i < 2, j < 8
//	dots3x4: the same for i < 3, j < 4
//	dots1x8: dst[j] = dot(x, w[j*ldw:]) for j < 8
//	dots1x1: returns dot(x, w)
//
// dots6x8 and dots2x8 may be nil: MatMulT then tiles with dots3x4. Only
// a CPU with 32 vector registers (AVX-512) holds a 6×8 tile's
// accumulators; dots2x8 takes the rows a six-row band leaves in pairs.
type dotKernels[X, W float32 | uint16] struct {
	dots6x8 func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int)
	dots2x8 func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int)
	// next6x8 and next2x8, where a set has them, are dots6x8 and dots2x8
	// that also prefetch the eight weight rows after their own, for the
	// last band over each group of eight (matMulBands); the same bits.
	next6x8, next2x8 func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int)
	dots3x4          func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int)
	dots1x8          func(x []X, w []W, ldw, nb int, dst []float32)
	dots1x1          func(x []X, w []W, nb int) float32
	// rowLanes, where a set has it, computes a single row against weight
	// rows [0, cols) (row c at w[c*ld:]) in place of dots1x8 and dots1x1:
	// a decode row's whole job in one call (asmwrap.go:asmLanes).
	rowLanes func(x []X, w []W, ld, nb int, dst []float32, cols int)
}

// kernelSet is one implementation of the kernels for both weight types.
type kernelSet struct {
	name string
	f32  dotKernels[float32, float32]
	bf16 dotKernels[float32, uint16]
	// dp are the kernels of bf16 products (bf16dot.go): bf16 weights
	// times activations rounded to bf16 by toBF16, the definition
	// MatMulT follows when the backend's BF16Dot is on.
	dp       dotKernels[uint16, uint16]
	toBF16   func(dst []uint16, src []float32)
	dpNative bool // dp runs on the CPU's bf16 instructions (not Go's)
	// tiles, where set, run bf16 products on AMX instead, by amxdot.go's
	// definition; dp is then used nowhere.
	tiles bool
	// optIn sets run only when KVLAB_KERNEL_SET names them, never as
	// the default (kernelset.go).
	optIn bool
	attn  attnKernels // attnkern.go
	// kvBF16 and kvF16 are attention's kernels over a 16-bit KV cache
	// (kv16.go); a set without them runs the Go ones.
	kvBF16, kvF16 kv16Kernels

	siluMul func(dst, g, u []float32) // dst = silu(g)·u, as siluMulGo (exp.go)
	geluMul func(dst, g, u []float32) // dst = gelu(g)·u, as geluMulGo (exp.go)

	// RMSNorm's two loops (ops.go): the sum of squares, as sumSquaresGo,
	// and dst[i] = w[i]·(x[i]·s), as normScaleGo.
	sumSquares func(x []float32) float64
	normScale  func(dst, x, w []float32, s float32)
	// rope rotates every head of a row by a table row, as ropeGo (ops.go).
	rope func(row, cs []float32, headDim int)
}

// goKernels is the portable kernel set.
var goKernels = kernelSet{name: "go", f32: goDotKernels[float32](), bf16: goDotKernels[uint16](),
	dp: goDPKernels, toBF16: toBF16Go, attn: goAttnKernels, siluMul: siluMulGo, geluMul: geluMulGo,
	sumSquares: sumSquaresGo, normScale: normScaleGo, rope: ropeGo}

func goDotKernels[W float32 | uint16]() dotKernels[float32, W] { return goTiles(dotGo[W]) }

// goTiles builds every tile shape from one dot product in Go: dotGo for
// dot.go's definition, dpGo for bf16 products (bf16dot.go).
func goTiles[X, W float32 | uint16](dot func(x []X, w []W, nb int) float32) dotKernels[X, W] {
	tile := func(th, tw int) func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int) {
		return func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int) {
			for i := range th {
				for j := range tw {
					dst[i*ldd+j] = dot(x[i*ldx:], w[j*ldw:], nb)
				}
			}
		}
	}
	return dotKernels[X, W]{
		dots6x8: tile(6, 8),
		dots2x8: tile(2, 8),
		dots3x4: tile(3, 4),
		dots1x8: func(x []X, w []W, ldw, nb int, dst []float32) {
			for j := range 8 {
				dst[j] = dot(x, w[j*ldw:], nb)
			}
		},
		dots1x1: dot,
	}
}

// kern is the kernel set MatMulT and attention use, chosen once at
// start-up (kernelset.go): the fastest this CPU runs, or the one
// KVLAB_KERNEL_SET names. Tests switch it to compare the sets bit for bit.
var kern = *chooseKernelSetOrPanic(runnable, os.Getenv(kernelSetEnv))

// runnable lists the kernel sets this CPU can run, goKernels first and the
// fastest last (cpuKernelSets in dot_amd64.go, dot_arm64.go or
// kernelset_other.go), for tests that compare them.
var runnable = cpuKernelSets()

// widen returns a weight as float32; a bf16 widens exactly.
func widen[W float32 | uint16](v W) float32 {
	switch v := any(v).(type) {
	case uint16:
		return kernels.BF16ToF32(v)
	case float32:
		return v
	}
	panic("unreachable")
}

// dotGo is steps 1 and 2 of the order above over nb groups of eight.
func dotGo[W float32 | uint16](x []float32, w []W, nb int) float32 {
	x, w = x[:8*nb], w[:8*nb]
	var s [8]float32
	for k := 0; k < len(x); k += 8 {
		xs, ws := x[k:k+8:k+8], w[k:k+8:k+8]
		for l := range 8 {
			s[l] = fmaf(xs[l], widen(ws[l]), s[l])
		}
	}
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

// dotTail is step 3: it adds x[i]·w[i] for i in [from, len(x)) to r, one
// fused multiply-add at a time. (x is bf16 in bf16 products, whose step 3
// is the same.)
func dotTail[X, W float32 | uint16](r float32, x []X, w []W, from int) float32 {
	for i := from; i < len(x); i++ {
		r = fmaf(widen(x[i]), widen(w[i]), r)
	}
	return r
}

// fmaf returns a·b+c rounded once to float32, as a hardware float32 fused
// multiply-add does.
//
// The product of two float32 values is exact in float64, so the only
// rounding before the final one is that of the float64 sum s = p+c. Rounding
// s to float32 gives the right answer unless s sits exactly halfway between
// two float32 values while the exact sum does not (the float64 rounding made
// a tie that was not there); the sum's rounding error e, which TwoSum
// recovers exactly, says which way the exact value lies.
func fmaf(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	z := float64(c)
	s := p + z
	bb := s - p
	e := (p - (s - bb)) + (z - bb)
	f := float32(s)
	if e == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return f
	}
	d := s - float64(f)
	if d == 0 {
		return f // s is a float32; s+e rounds to it since |e| ≤ ulp64(s)/2
	}
	// Is s a float32 midpoint? For normal float32 results the 29 bits a
	// float64 mantissa has beyond float32's are then exactly 1000…0.
	if math.Abs(s) >= 0x1p-126 {
		if math.Float64bits(s)&(1<<29-1) != 1<<28 {
			return f
		}
	} else { // subnormal float32 range: compare both neighbours directly
		g := math.Nextafter32(f, float32(math.Copysign(math.Inf(1), d)))
		if float64(g)-s != s-float64(f) {
			return f
		}
	}
	// A tie in s; the exact value is on the side of e.
	if (e > 0) == (d > 0) {
		return math.Nextafter32(f, float32(math.Copysign(math.Inf(1), d)))
	}
	return f
}

//go:build (amd64 || arm64) && !purego

package cpu

import (
	"math"
	"unsafe"
)

// The bounds checks between Go and the assembly kernels, shared by the
// amd64 and arm64 sets: each wrapper checks its slices once per call, so
// the assembly can trust its pointers.

// checkRows panics unless w[r*ld+off : r*ld+off+width] is in bounds for
// every r in rows, and reports whether rows is non-empty. w is a float32
// cache or a 16-bit one.
func checkRows[T float32 | uint16](w []T, off int, rows []int32, ld, width int) bool {
	if off < 0 || width < 0 || off+width > ld {
		panic("cpu: attention kernel reads past a row")
	}
	for _, r := range rows {
		if r < 0 || (int(r)+1)*ld > len(w) {
			panic("cpu: attention kernel row out of range")
		}
	}
	return len(rows) > 0
}

func asmDotKernels[W float32 | uint16](
	k3x4 func(x *float32, ldx int, w *W, ldw, nb int, dst *float32, ldd int),
	k1x8 func(x *float32, w *W, ldw, nb int, dst *float32),
	k1x1 func(x *float32, w *W, nb int) float32,
) dotKernels[float32, W] {
	return dotKernels[float32, W]{
		dots3x4: asmTile(3, 4, k3x4),
		dots1x8: asmRow8(k1x8),
		dots1x1: asmDot1x1(k1x1),
	}
}

// asmRow8 wraps a one-row kernel over eight weight rows, bounds-checking
// its slices once per call so the assembly can trust its pointers.
func asmRow8[X, W float32 | uint16](k func(x *X, w *W, ldw, nb int, dst *float32)) func(x []X, w []W, ldw, nb int, dst []float32) {
	g := groupLen[X]()
	return func(x []X, w []W, ldw, nb int, dst []float32) {
		if nb == 0 {
			clear(dst[:8])
			return
		}
		_ = x[g*nb-1]
		_ = w[7*ldw+g*nb-1]
		_ = dst[7]
		k(unsafe.SliceData(x), unsafe.SliceData(w), ldw, nb, unsafe.SliceData(dst))
	}
}

// rowKernel is one row against four weight rows, ls elements apart:
// dst[k*lds] = the row's dot product with w[k*ls:], k < 4 (dots1x4AVX2,
// dots1x4BF16AVX2, dots4DPAVX512).
type rowKernel[X, W float32 | uint16] func(x *X, w *W, ls, nb int, dst *float32, lds int)

// rowQuads is the one-row tile over eight neighbouring weight rows of a
// rowKernel: rows 0..3, then rows 4..7. The caller has bounds-checked all
// eight.
func rowQuads[X, W float32 | uint16](k rowKernel[X, W]) func(x *X, w *W, ldw, nb int, dst *float32) {
	return func(x *X, w *W, ldw, nb int, dst *float32) {
		k(x, w, ldw, nb, dst, 1)
		k(x, (*W)(unsafe.Add(unsafe.Pointer(w), 4*ldw*int(unsafe.Sizeof(*w)))), ldw, nb, (*float32)(unsafe.Add(unsafe.Pointer(dst), 16)), 1)
	}
}

// asmLanes is a single row against weight rows [0, cols) (row c at
// w[c*ld:]) with a rowKernel in four lanes: the rows cut in four
// quarters, each lane going down its own quarter one row a call, so that
// the weights stream as four long runs of memory rather than as groups
// of neighbouring rows, short runs the prefetchers must find again at
// every group (docs/benchmarks/real-models.md, "Decode: one row against
// four weight rows"). The last cols mod 4 rows go through one.
func asmLanes[X, W float32 | uint16](k rowKernel[X, W], one func(x []X, w []W, nb int) float32) func(x []X, w []W, ld, nb int, dst []float32, cols int) {
	g := groupLen[X]()
	return func(x []X, w []W, ld, nb int, dst []float32, cols int) {
		q := cols / 4
		if q > 0 {
			if nb == 0 {
				clear(dst[:4*q])
			} else {
				_ = x[g*nb-1]
				_ = w[(4*q-1)*ld+g*nb-1]
				_ = dst[4*q-1]
				for i := range q {
					k(unsafe.SliceData(x), &w[i*ld], q*ld, nb, &dst[i], q)
				}
			}
		}
		for c := 4 * q; c < cols; c++ {
			dst[c] = one(x, w[c*ld:], nb)
		}
	}
}

// asmTile wraps a th×tw tile kernel, bounds-checking its slices once per
// call so the assembly can trust its pointers.
func asmTile[X, W float32 | uint16](th, tw int, k func(x *X, ldx int, w *W, ldw, nb int, dst *float32, ldd int)) func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int) {
	g := groupLen[X]()
	return func(x []X, ldx int, w []W, ldw, nb int, dst []float32, ldd int) {
		if nb == 0 {
			for i := range th {
				clear(dst[i*ldd : i*ldd+tw])
			}
			return
		}
		_ = x[(th-1)*ldx+g*nb-1]
		_ = w[(tw-1)*ldw+g*nb-1]
		_ = dst[(th-1)*ldd+tw-1]
		k(unsafe.SliceData(x), ldx, unsafe.SliceData(w), ldw, nb, unsafe.SliceData(dst), ldd)
	}
}

// asmGateMul wraps a gated product's kernel (siluMul, geluMul): k over
// the whole groups of eight, the Go kernel goK over the rest.
func asmGateMul(k func(dst, gate, up *float32, n int), goK func(dst, g, u []float32)) func(dst, g, u []float32) {
	return func(dst, g, u []float32) {
		n8 := len(g) / 8
		if n8 > 0 {
			_, _ = dst[8*n8-1], u[8*n8-1]
			k(unsafe.SliceData(dst), unsafe.SliceData(g), unsafe.SliceData(u), n8)
		}
		goK(dst[8*n8:], g[8*n8:], u[8*n8:])
	}
}

// asmScaleMax is asmGateMul's split for attention's scaleMax.
func asmScaleMax(k func(x *float32, n int, s float32) float32) func(x []float32, s float32) float32 {
	return func(x []float32, s float32) float32 {
		n8 := len(x) / 8
		m := float32(math.Inf(-1))
		if n8 > 0 {
			m = k(unsafe.SliceData(x), n8, s)
		}
		return max(m, scaleMaxGo(x[8*n8:], s))
	}
}

// expShiftAsm is attention's expShift over this architecture's kernel
// (expShiftKernel). The last len(x) mod 8 values, which the kernel cannot
// take alone, go through it too, in a group of eight padded with m: Go's
// expNeg emulates each fused multiply-add in software, and a diagonal
// block of the causal mask ends in such a tail for every row. Each lane
// is computed on its own, so the padding changes no value. (The kernel is
// called by name, not passed in, so that the padded group can stay on
// the stack.)
func expShiftAsm(x []float32, m float32) {
	n8 := len(x) / 8
	if n8 > 0 {
		expShiftKernel(unsafe.SliceData(x), n8, m)
	}
	if tail := x[8*n8:]; len(tail) > 0 {
		g := [8]float32{m, m, m, m, m, m, m, m}
		copy(g[:], tail)
		expShiftKernel(&g[0], 1, m)
		copy(tail, g[:])
	}
}

// asmDotsRows8 wraps an eight-key score kernel over a float32 or a 16-bit
// cache.
func asmDotsRows8[W float32 | uint16](k func(x *float32, w *W, rows *int32, ld, nb int, dst *float32)) func(x []float32, w []W, off int, rows []int32, ld, nb int, dst []float32) {
	return func(x []float32, w []W, off int, rows []int32, ld, nb int, dst []float32) {
		_ = x[:8*nb]
		_ = dst[7]
		checkRows(w, off, rows[:8], ld, 8*nb)
		if nb == 0 {
			clear(dst[:8])
			return
		}
		k(unsafe.SliceData(x), &w[off], unsafe.SliceData(rows), ld, nb, unsafe.SliceData(dst))
	}
}

// asmDot1x1 wraps a one-by-one dot product.
func asmDot1x1[W float32 | uint16](k func(x *float32, w *W, nb int) float32) func(x []float32, w []W, nb int) float32 {
	return func(x []float32, w []W, nb int) float32 {
		_ = x[:8*nb]
		_ = w[:8*nb]
		return k(unsafe.SliceData(x), unsafe.SliceData(w), nb)
	}
}

// asmAxpyRows wraps the axpy kernels held by their number of lanes-wide
// accumulators (byAccs[len(acc)/lanes]), over a float32 or a 16-bit cache.
func asmAxpyRows[W float32 | uint16, K ~func(acc, p *float32, v *W, rows *int32, n, ld int)](byAccs []K, lanes int) func(acc, p []float32, v []W, off int, rows []int32, ld int) {
	return func(acc, p []float32, v []W, off int, rows []int32, ld int) {
		w := len(acc)
		if w%lanes != 0 || w/lanes >= len(byAccs) || byAccs[w/lanes] == nil {
			panic("cpu: axpyRows: no kernel for this width")
		}
		_ = p[:len(rows)]
		if checkRows(v, off, rows, ld, w) {
			byAccs[w/lanes](unsafe.SliceData(acc), unsafe.SliceData(p), &v[off], unsafe.SliceData(rows), len(rows), ld)
		}
	}
}

// prefetchLines is how many 64-byte lines a row prefetch asks for: those
// the span of width values from w[off] touches, and one more when rows
// differ in alignment (a row length that is not a whole number of lines).
func prefetchLines[T float32 | uint16](w []T, off, ld, width int) int {
	size := int(unsafe.Sizeof(w[0]))
	skew := int(uintptr(unsafe.Pointer(&w[off])) % 64)
	lines := (skew + size*width + 63) / 64
	if (size*ld)%64 != 0 {
		lines++
	}
	return lines
}

// asmAxpy6By16 wraps a six-row axpy kernel over 16 value columns (float32
// or 16-bit values V) as axpyRows6 for each width it takes, 16 columns a
// call: a column's chain of fused multiply-adds is the same whichever
// call computes it. The slices are bounds-checked once per call.
func asmAxpy6By16[V float32 | uint16](k func(acc *float32, step int, p *float32, v *V, rows *int32, n, ld int)) func(acc []float32, step int, p []float32, v []V, off int, rows []int32, ld, width int) {
	return func(acc []float32, step int, p []float32, v []V, off int, rows []int32, ld, width int) {
		checkAxpy6(acc, step, p, len(rows), width)
		if checkRows(v, off, rows, ld, width) {
			for d := 0; d < width; d += 16 {
				k(&acc[d], step, unsafe.SliceData(p), &v[off+d], unsafe.SliceData(rows), len(rows), ld)
			}
		}
	}
}

// checkAxpy6 panics unless axpyRows6's accumulators and weights for n
// keys are in bounds and width is one it takes (64, 32 or 16).
func checkAxpy6(acc []float32, step int, p []float32, n, width int) {
	if width != 64 && width != 32 && width != 16 {
		panic("cpu: axpyRows6: no kernel for this width")
	}
	_ = acc[5*step+width-1]
	if n > 0 {
		_ = p[5*attnBlock+n-1]
	}
}

// asmSumSquares wraps a sum-of-squares kernel over whole groups of eight
// (sumSquaresGo's lanes and tree); the tail is added in Go, in order.
func asmSumSquares(k func(x *float32, n int) float64) func(x []float32) float64 {
	return func(x []float32) float64 {
		n8 := len(x) / 8
		var s float64
		if n8 > 0 {
			s = k(unsafe.SliceData(x), n8)
		}
		return sumSquaresTail(s, x[8*n8:])
	}
}

// asmNormScale wraps normScale's kernel over whole groups of eight; the
// tail goes through normScaleGo.
func asmNormScale(k func(dst, x, w *float32, n int, s float32)) func(dst, x, w []float32, s float32) {
	return func(dst, x, w []float32, s float32) {
		n8 := len(x) / 8
		if n8 > 0 {
			_, _ = dst[8*n8-1], w[8*n8-1]
			k(unsafe.SliceData(dst), unsafe.SliceData(x), unsafe.SliceData(w), n8, s)
		}
		normScaleGo(dst[8*n8:], x[8*n8:], w[8*n8:], s)
	}
}

// asmRope wraps a RoPE kernel that rotates heads of headDim with headDim/2
// a multiple of 8; other widths go through ropeGo.
func asmRope(k func(row, cs *float32, heads, half8 int)) func(row, cs []float32, headDim int) {
	return func(row, cs []float32, headDim int) {
		half := headDim / 2
		if half%8 != 0 || len(row) == 0 {
			ropeGo(row, cs, headDim)
			return
		}
		if len(row)%headDim != 0 {
			panic("cpu: RoPE row is not a whole number of heads")
		}
		_ = cs[headDim-1]
		k(unsafe.SliceData(row), unsafe.SliceData(cs), len(row)/headDim, half/8)
	}
}

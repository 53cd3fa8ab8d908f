//go:build amd64 && !purego

package cpu

import "unsafe"

// Implemented in kv16_amd64.s.
//
//go:noescape
func dotsRows8BF16AVX2(x *float32, w *uint16, rows *int32, ld, nb int, dst *float32)

//go:noescape
func dotsRows8F16AVX2(x *float32, w *uint16, rows *int32, ld, nb int, dst *float32)

//go:noescape
func dots1x1F16AVX2(x *float32, w *uint16, nb int) float32

//go:noescape
func axpyRows1BF16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows2BF16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows4BF16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows6BF16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows8BF16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows1F16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows2F16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows4F16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows6F16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows8F16AVX2(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x16BF16AVX2(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x16F16AVX2(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func prefetchRows16AVX2(w *uint16, rows *int32, n, ld, lines int)

//go:noescape
func dots3x4F16AVX2(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots1x8F16AVX2(x *float32, w *uint16, ldw, nb int, dst *float32)

// kvBF16AVX2 and kvF16AVX2 are the AVX2 kernels over a 16-bit cache, for
// avx2Kernels (and avx512Kernels, which copies it). A CPU without F16C
// runs float16's in Go.
var (
	kvBF16AVX2 = asmKV16(dotsRows8BF16AVX2, dots1x1BF16AVX2, [9]axpy16{
		1: axpyRows1BF16AVX2, 2: axpyRows2BF16AVX2, 4: axpyRows4BF16AVX2, 6: axpyRows6BF16AVX2, 8: axpyRows8BF16AVX2,
	}, axpy6x16BF16AVX2, true, dotKernels[float32, uint16]{})
	kvF16AVX2 = func() kv16Kernels {
		if !hasF16C() {
			return kv16Kernels{}
		}
		return asmKV16(dotsRows8F16AVX2, dots1x1F16AVX2, [9]axpy16{
			1: axpyRows1F16AVX2, 2: axpyRows2F16AVX2, 4: axpyRows4F16AVX2, 6: axpyRows6F16AVX2, 8: axpyRows8F16AVX2,
		}, axpy6x16F16AVX2, false, asmDotKernels(dots3x4F16AVX2, dots1x8F16AVX2, dots1x1F16AVX2))
	}()
)

// axpy16 is an assembly axpy kernel over 16-bit values.
type axpy16 func(acc, p *float32, v *uint16, rows *int32, n, ld int)

// asmKV16 wraps one dtype's assembly, bounds-checking the slices once per
// call as avx2Kernels' wrappers do. axpy holds the axpy kernels by the
// number of YMM accumulators (len(acc)/8), axpy6 the six-row one; tiles and own are
// kv16Kernels' tiles and ownTiles.
func asmKV16(rows8 func(x *float32, w *uint16, rows *int32, ld, nb int, dst *float32),
	dot1 func(x *float32, w *uint16, nb int) float32, axpy [9]axpy16,
	axpy6 func(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int), tiles bool, own dotKernels[float32, uint16]) kv16Kernels {
	return kv16Kernels{
		dotsRows8: asmDotsRows8(rows8),
		dots1x1:   asmDot1x1(dot1),
		axpyRows:  asmAxpyRows(axpy[:], 8),
		axpyRows6: asmAxpy6By16(axpy6),
		prefetchRows: func(w []uint16, off int, rows []int32, ld, width int) {
			if width > 0 && len(rows) > 0 && off < len(w) {
				lines := prefetchLines(w, off, ld, width)
				prefetchRows16AVX2(&w[off], unsafe.SliceData(rows), len(rows), ld, lines)
			}
		},
		tiles:    tiles,
		ownTiles: own,
	}
}

// hasF16C reports whether the CPU converts float16 (VCVTPH2PS).
func hasF16C() bool {
	if !hasAVX2FMA() {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const f16c = 1 << 29
	return ecx1&f16c != 0
}

//go:build !purego

package cpu

import "unsafe"

// Implemented in dot_arm64.s.
//
//go:noescape
func dotsRows8BF16NEON(x *float32, w *uint16, rows *int32, ld, nb int, dst *float32)

//go:noescape
func dotsRows8F16NEON(x *float32, w *uint16, rows *int32, ld, nb int, dst *float32)

//go:noescape
func dots1x1F16NEON(x *float32, w *uint16, nb int) float32

//go:noescape
func axpy6x16BF16NEON(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x16F16NEON(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows2BF16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows4BF16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows8BF16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows12BF16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows16BF16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows2F16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows4F16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows8F16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows12F16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpyRows16F16NEON(acc, p *float32, v *uint16, rows *int32, n, ld int)

// kvBF16NEON and kvF16NEON are the NEON kernels over a 16-bit cache, for
// neonKernels: the float32 kernels with each value widened as it is loaded
// (SHLL for bf16, FCVTL for float16; both exact). Float16 conversion is
// part of every arm64 CPU's Advanced SIMD, so there is no fallback.
var (
	kvBF16NEON = neonKV16(dotsRows8BF16NEON, dots1x1BF16NEON, [17]axpy16{
		2: axpyRows2BF16NEON, 4: axpyRows4BF16NEON, 8: axpyRows8BF16NEON, 12: axpyRows12BF16NEON, 16: axpyRows16BF16NEON,
	}, axpy6x16BF16NEON, true)
	kvF16NEON = neonKV16(dotsRows8F16NEON, dots1x1F16NEON, [17]axpy16{
		2: axpyRows2F16NEON, 4: axpyRows4F16NEON, 8: axpyRows8F16NEON, 12: axpyRows12F16NEON, 16: axpyRows16F16NEON,
	}, axpy6x16F16NEON, false)
)

// axpy16 is an assembly axpy kernel over 16-bit values.
type axpy16 func(acc, p *float32, v *uint16, rows *int32, n, ld int)

// neonKV16 wraps one dtype's assembly, bounds-checking the slices once per
// call as neonKernels' wrappers do. axpy holds the axpy kernels by the
// number of NEON accumulators (len(acc)/4), axpy6 the six-row one.
func neonKV16(rows8 func(x *float32, w *uint16, rows *int32, ld, nb int, dst *float32),
	dot1 func(x *float32, w *uint16, nb int) float32, axpy [17]axpy16,
	axpy6 func(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int), tiles bool) kv16Kernels {
	return kv16Kernels{
		dotsRows8: asmDotsRows8(rows8),
		dots1x1:   asmDot1x1(dot1),
		axpyRows:  asmAxpyRows(axpy[:], 4),
		axpyRows6: asmAxpy6By16(axpy6),
		prefetchRows: func(w []uint16, off int, rows []int32, ld, width int) {
			if width > 0 && len(rows) > 0 && off < len(w) {
				lines := prefetchLines(w, off, ld, width)
				prefetchRowsNEON(unsafe.Pointer(&w[off]), unsafe.SliceData(rows), len(rows), 2*ld, lines)
			}
		},
		tiles: tiles,
	}
}

//go:build !purego

package cpu

import (
	"unsafe"
)

// Implemented in dot_arm64.s.
//
//go:noescape
func dots3x4NEON(x *float32, ldx int, w *float32, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots1x8NEON(x, w *float32, ldw, nb int, dst *float32)

//go:noescape
func dots1x1NEON(x, w *float32, nb int) float32

//go:noescape
func dots3x4BF16NEON(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots1x8BF16NEON(x *float32, w *uint16, ldw, nb int, dst *float32)

//go:noescape
func dots1x1BF16NEON(x *float32, w *uint16, nb int) float32

//go:noescape
func dotsRows8NEON(x, w *float32, rows *int32, ld, nb int, dst *float32)

//go:noescape
func axpyRows2NEON(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows4NEON(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows8NEON(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows12NEON(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows16NEON(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func prefetchRowsNEON(w unsafe.Pointer, rows *int32, n, stride, lines int)

//go:noescape
func axpy6x16NEON(acc *float32, step int, p, v *float32, rows *int32, n, ld int)

//go:noescape
func expShiftNEON(x *float32, n int, m float32)

// expShiftKernel is the expShift kernel of asmwrap.go:expShiftAsm.
func expShiftKernel(x *float32, n int, m float32) { expShiftNEON(x, n, m) }

//go:noescape
func scaleMaxNEON(x *float32, n int, s float32) float32

//go:noescape
func siluMulNEON(dst, gate, up *float32, n int)

//go:noescape
func geluMulNEON(dst, gate, up *float32, n int)

// axpyNEON holds the assembly axpy kernels by the number of NEON
// accumulators (len(acc)/4): one for each of axpyWidths.
var axpyNEON = [17]func(acc, p, v *float32, rows *int32, n, ld int){
	2: axpyRows2NEON, 4: axpyRows4NEON, 8: axpyRows8NEON, 12: axpyRows12NEON, 16: axpyRows16NEON,
}

// neonKernels is the arm64 kernel set: every kernel of avx2Kernels, in
// NEON (those over a 16-bit KV cache too, kv16_arm64.go). Each dot product keeps its eight lane sums in two four-lane
// registers and reduces them in dot.go's tree, so the bits are those of
// the Go kernels. There is no 6×8 tile: its 48 eight-lane accumulators
// would need 96 of NEON's 32 registers, so MatMulT tiles 3×4 (24); the
// six-row axpy goes 16 columns at a time (24 registers of accumulators). The
// slice arguments are bounds-checked here, once per call, so the assembly
// can trust its pointers. Advanced SIMD is part of every arm64 CPU Go runs
// on, so the set needs no feature check.
var neonKernels = kernelSet{
	name: "neon",
	f32:  asmDotKernels(dots3x4NEON, dots1x8NEON, dots1x1NEON),
	bf16: asmDotKernels(dots3x4BF16NEON, dots1x8BF16NEON, dots1x1BF16NEON),
	// bf16 products in Go (bf16dot.go): no bf16 dot-product kernels here.
	dp:     goDPKernels,
	toBF16: toBF16Go,
	// kv16_arm64.go
	kvBF16:  kvBF16NEON,
	kvF16:   kvF16NEON,
	siluMul: asmGateMul(siluMulNEON, siluMulGo),
	geluMul: asmGateMul(geluMulNEON, geluMulGo),
	// RMSNorm's loops and RoPE in Go (ops.go): no NEON kernels for them yet.
	sumSquares: sumSquaresGo,
	normScale:  normScaleGo,
	rope:       ropeGo,
	attn: attnKernels{
		dotsRows8: asmDotsRows8(dotsRows8NEON),
		axpyRows:  asmAxpyRows(axpyNEON[:], 4),
		axpyRows6: asmAxpy6By16(axpy6x16NEON),
		scaleMax:  asmScaleMax(scaleMaxNEON),
		expShift:  expShiftAsm,
		prefetchRows: func(w []float32, off int, rows []int32, ld, width int) {
			// A prefetch never faults, so the rows need no bounds check
			// (they are checked where they are read).
			if width > 0 && len(rows) > 0 && off < len(w) {
				lines := prefetchLines(w, off, ld, width)
				prefetchRowsNEON(unsafe.Pointer(&w[off]), unsafe.SliceData(rows), len(rows), 4*ld, lines)
			}
		},
	},
}

// cpuKernelSets returns the kernel sets this CPU runs, slowest first: the
// Go kernels and NEON (every arm64 CPU has it).
func cpuKernelSets() []*kernelSet { return []*kernelSet{&goKernels, &neonKernels} }

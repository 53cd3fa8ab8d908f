//go:build amd64 && !purego

package cpu

import (
	"unsafe"
)

// Implemented in dot_amd64.s.
//
//go:noescape
func dots3x4AVX2(x *float32, ldx int, w *float32, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots1x4AVX2(x, w *float32, ls, nb int, dst *float32, lds int)

//go:noescape
func dots1x1AVX2(x, w *float32, nb int) float32

func cpuid(eaxIn, ecxIn uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax uint32)

//go:noescape
func dots3x4BF16AVX2(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots1x4BF16AVX2(x *float32, w *uint16, ls, nb int, dst *float32, lds int)

//go:noescape
func dots1x1BF16AVX2(x *float32, w *uint16, nb int) float32

//go:noescape
func dotsRows8AVX2(x, w *float32, rows *int32, ld, nb int, dst *float32)

//go:noescape
func axpyRows8AVX2(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows1AVX2(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows2AVX2(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows4AVX2(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpyRows6AVX2(acc, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpy6x16AVX2(acc *float32, step int, p, v *float32, rows *int32, n, ld int)

//go:noescape
func prefetchRowsAVX2(w *float32, rows *int32, n, ld, lines int)

//go:noescape
func expShiftAVX2(x *float32, n int, m float32)

// expShiftKernel is the expShift kernel of asmwrap.go:expShiftAsm.
func expShiftKernel(x *float32, n int, m float32) { expShiftAVX2(x, n, m) }

//go:noescape
func scaleMaxAVX2(x *float32, n int, s float32) float32

//go:noescape
func sumSquaresAVX2(x *float32, n int) float64

//go:noescape
func normScaleAVX2(dst, x, w *float32, n int, s float32)

//go:noescape
func ropeAVX2(row, cs *float32, heads, half8 int)

//go:noescape
func siluMulAVX2(dst, gate, up *float32, n int)

//go:noescape
func geluMulAVX2(dst, gate, up *float32, n int)

// axpyAVX2 holds the assembly axpy kernels by the number of YMM
// accumulators (len(acc)/8).
var axpyAVX2 = [9]func(acc, p, v *float32, rows *int32, n, ld int){
	1: axpyRows1AVX2, 2: axpyRows2AVX2, 4: axpyRows4AVX2, 6: axpyRows6AVX2, 8: axpyRows8AVX2,
}

// withLanes gives ks a decode row's kernel in four lanes (asmLanes) of k.
func withLanes[W float32 | uint16](ks dotKernels[float32, W], k rowKernel[float32, W]) dotKernels[float32, W] {
	ks.rowLanes = asmLanes(k, ks.dots1x1)
	return ks
}

// avx2Kernels wraps the assembly. The slice arguments are bounds-checked
// here, once per call, so the assembly can trust its pointers.
var avx2Kernels = kernelSet{
	name: "avx2",
	f32:  withLanes(asmDotKernels(dots3x4AVX2, rowQuads(dots1x4AVX2), dots1x1AVX2), dots1x4AVX2),
	bf16: withLanes(asmDotKernels(dots3x4BF16AVX2, rowQuads(dots1x4BF16AVX2), dots1x1BF16AVX2), dots1x4BF16AVX2),
	// bf16 products in Go (bf16dot.go): no bf16 dot-product kernels here.
	dp:     goDPKernels,
	toBF16: toBF16Go,
	// kv16_amd64.go
	kvBF16:     kvBF16AVX2,
	kvF16:      kvF16AVX2,
	siluMul:    asmGateMul(siluMulAVX2, siluMulGo),
	geluMul:    asmGateMul(geluMulAVX2, geluMulGo),
	sumSquares: asmSumSquares(sumSquaresAVX2),
	normScale:  asmNormScale(normScaleAVX2),
	rope:       asmRope(ropeAVX2),
	attn: attnKernels{
		dotsRows8: asmDotsRows8(dotsRows8AVX2),
		axpyRows:  asmAxpyRows(axpyAVX2[:], 8),
		axpyRows6: asmAxpy6By16(axpy6x16AVX2),
		scaleMax:  asmScaleMax(scaleMaxAVX2),
		expShift:  expShiftAsm,
		prefetchRows: func(w []float32, off int, rows []int32, ld, width int) {
			// A prefetch never faults, so the rows need no bounds check
			// (they are checked where they are read).
			if width > 0 && len(rows) > 0 && off < len(w) {
				lines := prefetchLines(w, off, ld, width)
				prefetchRowsAVX2(&w[off], unsafe.SliceData(rows), len(rows), ld, lines)
			}
		},
	},
}

// hasAVX2FMA reports whether the CPU has AVX2 and FMA and the operating
// system saves the YMM registers.
func hasAVX2FMA() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return false
	}
	if xgetbv0()&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx2 = 1 << 5
	return ebx7&avx2 != 0
}

// cpuKernelSets returns the kernel sets this CPU runs, slowest first:
// the Go kernels, then AVX2+FMA, AVX-512 and AMX where the CPU has them.
func cpuKernelSets() []*kernelSet {
	sets := []*kernelSet{&goKernels}
	if hasAVX2FMA() {
		sets = append(sets, &avx2Kernels)
	}
	if hasAVX512() {
		sets = append(sets, &avx512Kernels)
	}
	if hasAMX() { // amx_amd64.go
		sets = append(sets, &amxKernels)
	}
	return sets
}

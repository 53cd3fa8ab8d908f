//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"kvlab/kernels"
)

// Implemented in dot_avx512_amd64.s.
//
//go:noescape
func dots6x8AVX512(x *float32, ldx int, w *float32, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots6x8BF16AVX512(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots2x8AVX512(x *float32, ldx int, w *float32, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots2x8BF16AVX512(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

// The ...Next tiles prefetch the eight weight rows after their own.
//
//go:noescape
func dots6x8NextAVX512(x *float32, ldx int, w *float32, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots6x8NextBF16AVX512(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots2x8NextAVX512(x *float32, ldx int, w *float32, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots2x8NextBF16AVX512(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func axpy6x64AVX512(acc *float32, step int, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpy6x32AVX512(acc *float32, step int, p, v *float32, rows *int32, n, ld int)

//go:noescape
func axpy6x16AVX512(acc *float32, step int, p, v *float32, rows *int32, n, ld int)

// avx512Kernels is avx2Kernels with the 6×8 tiles (float32 and bf16
// weights) and attention's six-row axpy. The one-row kernels stay AVX2: a
// decode row is bound by memory, not by the width of the FMAs.
var avx512Kernels = func() kernelSet {
	ks := avx2Kernels
	ks.name = "avx512"
	ks.f32.dots6x8 = asmTile(6, 8, dots6x8AVX512)
	ks.bf16.dots6x8 = asmTile(6, 8, dots6x8BF16AVX512)
	ks.f32.dots2x8 = asmTile(2, 8, dots2x8AVX512)
	ks.bf16.dots2x8 = asmTile(2, 8, dots2x8BF16AVX512)
	ks.f32.next6x8 = asmTile(6, 8, dots6x8NextAVX512)
	ks.bf16.next6x8 = asmTile(6, 8, dots6x8NextBF16AVX512)
	ks.f32.next2x8 = asmTile(2, 8, dots2x8NextAVX512)
	ks.bf16.next2x8 = asmTile(2, 8, dots2x8NextBF16AVX512)
	// kv16_avx512_amd64.go: the six-row axpy and 6×8 tiles over a
	// 16-bit KV cache.
	ks.kvBF16.axpyRows6 = kvAxpy6AVX512(kernels.KVBF16)
	if ks.kvF16.dotsRows8 != nil {
		ks.kvF16.axpyRows6 = kvAxpy6AVX512(kernels.KVF16)
		ks.kvF16.ownTiles.dots6x8 = asmTile(6, 8, dots6x8F16AVX512)
	}
	ks.attn.axpyRows6 = asmAxpy6(axpy6x64AVX512, axpy6x32AVX512, axpy6x16AVX512)
	if hasAVX512BF16() { // bf16dot_amd64.go
		ks.dp, ks.toBF16, ks.dpNative = dpAVX512, toBF16ByAVX512, true
	}
	return ks
}()

// asmAxpy6 wraps the six-row axpy kernels of 64-, 32- and 16-wide value
// columns (float32 or 16-bit values V), bounds-checking the slices once
// per call so the assembly can trust its pointers.
func asmAxpy6[V float32 | uint16](k64, k32, k16 func(acc *float32, step int, p *float32, v *V, rows *int32, n, ld int)) func(acc []float32, step int, p []float32, v []V, off int, rows []int32, ld, width int) {
	return func(acc []float32, step int, p []float32, v []V, off int, rows []int32, ld, width int) {
		checkAxpy6(acc, step, p, len(rows), width)
		k := k16
		switch width {
		case 64:
			k = k64
		case 32:
			k = k32
		}
		if checkRows(v, off, rows, ld, width) {
			k(unsafe.SliceData(acc), step, unsafe.SliceData(p), &v[off], unsafe.SliceData(rows), len(rows), ld)
		}
	}
}

// hasAVX512 reports whether the CPU has the AVX-512 foundation, DQ
// (VINSERTF32X8, VBROADCASTF32X8) and BW (a 512-bit VPSHUFB) instructions
// and the operating system saves the opmask and all 32 ZMM registers.
func hasAVX512() bool {
	if !hasAVX2FMA() {
		return false
	}
	const zmmState = 0xe6 // XMM, YMM, opmask, upper ZMM0-15, ZMM16-31
	if xgetbv0()&zmmState != zmmState {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx512f, avx512dq, avx512bw = 1 << 16, 1 << 17, 1 << 30
	const want = avx512f | avx512dq | avx512bw
	return ebx7&want == want
}

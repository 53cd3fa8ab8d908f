//go:build amd64 && !purego

package cpu

// Implemented in dot_avx512_amd64.s.
//
//go:noescape
func dots6x8DPAVX512(x *uint16, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots6x8NextDPAVX512(x *uint16, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots2x8DPAVX512(x *uint16, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func dots2x8NextDPAVX512(x *uint16, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

//go:noescape
func toBF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func vdpbf16psProbe(acc *float32, x, w *uint16)

// dpAVX512 are the bf16 product kernels on AVX512-BF16, for avx512Kernels
// on a CPU that has it. A single row (decode) runs the prefetching pair
// tile on the row twice; a column short of eight runs in Go.
var dpAVX512 = dotKernels[uint16, uint16]{
	dots6x8: asmTile(6, 8, dots6x8DPAVX512),
	next6x8: asmTile(6, 8, dots6x8NextDPAVX512),
	dots2x8: asmTile(2, 8, dots2x8DPAVX512),
	next2x8: asmTile(2, 8, dots2x8NextDPAVX512),
	dots1x8: dots1x8ByPair(asmTile(2, 8, dots2x8NextDPAVX512)),
	dots1x1: dpGo,
}

// dots1x8ByPair makes the one-row kernel of a pair tile: the row twice
// (ldx 0), both results written to the same place (ldd 0). The pair tile
// does twice the arithmetic, but a single row's product is bound by
// reading the weights, which it reads once.
func dots1x8ByPair(pair func(x []uint16, ldx int, w []uint16, ldw, nb int, dst []float32, ldd int)) func(x []uint16, w []uint16, ldw, nb int, dst []float32) {
	return func(x []uint16, w []uint16, ldw, nb int, dst []float32) {
		pair(x, 0, w, ldw, nb, dst, 0)
	}
}

// toBF16ByAVX512 is step 0 with VCVTNEPS2BF16, sixteen values at a time.
func toBF16ByAVX512(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	n := len(src) / 16
	if n > 0 {
		toBF16AVX512(&dst[0], &src[0], n)
	}
	toBF16Go(dst[16*n:], src[16*n:])
}

// hasAVX512BF16 reports whether the CPU has AVX-512 (hasAVX512) and its
// bf16 instructions, VDPBF16PS and VCVTNEPS2BF16.
func hasAVX512BF16() bool {
	if !hasAVX512() {
		return false
	}
	eax71, _, _, _ := cpuid(7, 1)
	const avx512bf16 = 1 << 5
	return eax71&avx512bf16 != 0
}

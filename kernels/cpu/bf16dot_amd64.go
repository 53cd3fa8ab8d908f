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
func dots4DPAVX512(x *uint16, w *uint16, ls, nb int, dst *float32, lds int)

//go:noescape
func toBF16AVX512(dst *uint16, src *float32, n int)

//go:noescape
func vdpbf16psProbe(acc *float32, x, w *uint16)

// dpAVX512 are the bf16 product kernels on AVX512-BF16, for avx512Kernels
// on a CPU that has it. A single row (decode) runs dots4DPAVX512 in four
// lanes (asmLanes); a column short of eight runs in Go. That kernel was
// first the pair tile run on the row twice (half a line of eight rows a
// step, every product done twice), then the same kernel on neighbouring
// rows; BenchmarkDecodeOneRowTile times the three token by token.
var dpAVX512 = dotKernels[uint16, uint16]{
	dots6x8:  asmTile(6, 8, dots6x8DPAVX512),
	next6x8:  asmTile(6, 8, dots6x8NextDPAVX512),
	dots2x8:  asmTile(2, 8, dots2x8DPAVX512),
	next2x8:  asmTile(2, 8, dots2x8NextDPAVX512),
	dots1x8:  asmRow8(rowQuads(dots4DPAVX512)),
	dots1x1:  dpGo,
	rowLanes: asmLanes(dots4DPAVX512, dpGo),
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

// hasAVX512BF16 reports whether the CPU has AVX-512 (hasAVX512), its
// bf16 instructions, VDPBF16PS and VCVTNEPS2BF16, and their YMM forms
// (AVX512VL).
func hasAVX512BF16() bool {
	if !hasAVX512() {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx512vl = 1 << 31 // the YMM forms of the one-row tile
	eax71, _, _, _ := cpuid(7, 1)
	const avx512bf16 = 1 << 5
	return ebx7&avx512vl != 0 && eax71&avx512bf16 != 0
}

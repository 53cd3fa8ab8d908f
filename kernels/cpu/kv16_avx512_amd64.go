//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"kvlab/kernels"
)

// Implemented in kv16_avx512_amd64.s.
//
//go:noescape
func axpy6x64BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x32BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x16BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x64F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x32F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func axpy6x16F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)

//go:noescape
func dots6x8F16AVX512(x *float32, ldx int, w *uint16, ldw, nb int, dst *float32, ldd int)

// kvAxpy6AVX512 returns attention's six-row axpy over a cache of 16-bit
// dtype dt, for avx512Kernels, with avx512Kernels' bounds checks.
func kvAxpy6AVX512(dt kernels.KVDType) func(acc []float32, step int, p []float32, v []uint16, off int, rows []int32, ld, width int) {
	ks := [...]func(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int){axpy6x64BF16AVX512, axpy6x32BF16AVX512, axpy6x16BF16AVX512}
	if dt == kernels.KVF16 {
		ks = [...]func(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int){axpy6x64F16AVX512, axpy6x32F16AVX512, axpy6x16F16AVX512}
	}
	return func(acc []float32, step int, p []float32, v []uint16, off int, rows []int32, ld, width int) {
		var k func(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
		switch width {
		case 64:
			k = ks[0]
		case 32:
			k = ks[1]
		case 16:
			k = ks[2]
		default:
			panic("cpu: axpyRows6: no kernel for this width")
		}
		_ = acc[5*step+width-1]
		_ = p[5*attnBlock+len(rows)-1]
		if checkRows(v, off, rows, ld, width) {
			k(unsafe.SliceData(acc), step, unsafe.SliceData(p), &v[off], unsafe.SliceData(rows), len(rows), ld)
		}
	}
}

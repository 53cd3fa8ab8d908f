//go:build amd64 && !purego

package cpu

import (
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
	if dt == kernels.KVF16 {
		return asmAxpy6(axpy6x64F16AVX512, axpy6x32F16AVX512, axpy6x16F16AVX512)
	}
	return asmAxpy6(axpy6x64BF16AVX512, axpy6x32BF16AVX512, axpy6x16BF16AVX512)
}

//go:build (amd64 || arm64) && !purego

package cpu

import "unsafe"

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
) dotKernels[W] {
	return dotKernels[W]{
		dots3x4: asmTile(3, 4, k3x4),
		dots1x8: func(x []float32, w []W, ldw, nb int, dst []float32) {
			if nb == 0 {
				clear(dst[:8])
				return
			}
			_ = x[8*nb-1]
			_ = w[7*ldw+8*nb-1]
			_ = dst[7]
			k1x8(unsafe.SliceData(x), unsafe.SliceData(w), ldw, nb, unsafe.SliceData(dst))
		},
		dots1x1: func(x []float32, w []W, nb int) float32 {
			_ = x[:8*nb]
			_ = w[:8*nb]
			return k1x1(unsafe.SliceData(x), unsafe.SliceData(w), nb)
		},
	}
}

// asmTile wraps a th×tw tile kernel, bounds-checking its slices once per
// call so the assembly can trust its pointers.
func asmTile[W float32 | uint16](th, tw int, k func(x *float32, ldx int, w *W, ldw, nb int, dst *float32, ldd int)) func(x []float32, ldx int, w []W, ldw, nb int, dst []float32, ldd int) {
	return func(x []float32, ldx int, w []W, ldw, nb int, dst []float32, ldd int) {
		if nb == 0 {
			for i := range th {
				clear(dst[i*ldd : i*ldd+tw])
			}
			return
		}
		_ = x[(th-1)*ldx+8*nb-1]
		_ = w[(tw-1)*ldw+8*nb-1]
		_ = dst[(th-1)*ldd+tw-1]
		k(unsafe.SliceData(x), ldx, unsafe.SliceData(w), ldw, nb, unsafe.SliceData(dst), ldd)
	}
}

package cpu

import "math"

// Attention's inner loops, as kernels with the same portable and
// assembly implementations as MatMulT's (kernelSet). Keys and values are
// rows of the paged cache, so the kernels take a list of row numbers; off
// is the head's first column and ld the cache's row length.
//
//	dotsRows8: dst[j] = dot(x, w[rows[j]*ld+off:]) for j < 8, over 8*nb
//	           elements, in the order of dot.go (steps 1 and 2)
//	axpyRows:  acc[d] = fma(p[t], v[rows[t]*ld+off+d], acc[d]) for t in
//	           order, d < len(acc), for len(acc) one of axpyWidths
//
// In the axpy kernel every element of acc is a chain of fused
// multiply-adds over the keys in position order, whatever the kernel's
// width, so the width a head is cut into does not change a bit. The width
// decides speed only: each element's chain waits on its previous fused
// multiply-add, so a kernel needs several eight-wide chains side by side
// to keep the FMA units busy, and one pass over the keys per head is
// cheaper than several. Hence the widths of 48 (head_dim 48, as in
// llama2.c's small models) and 32 besides 64.
//
//	axpyRows6: axpyRows for six rows at once, each value row read once:
//	           for r < 6, acc[r*step+d] = fma(p[r*attnBlock+t],
//	           v[rows[t]*ld+off+d], acc[r*step+d]), for width 64, 32 or 16;
//	           nil where the kernel set has no such kernel
//
// scaleMax sets x[i] *= s and returns the largest x[i] (-Inf for none).
//
// expShift sets x[i] = expNeg(x[i] - m) (exp.go), for x[i] ≤ m.
//
// prefetchRows asks for w[rows[j]*ld+off:][:width] to be brought into cache
// for every j, ahead of its use; it computes nothing (a no-op in Go).
type attnKernels struct {
	dotsRows8    func(x, w []float32, off int, rows []int32, ld, nb int, dst []float32)
	axpyRows     func(acc, p, v []float32, off int, rows []int32, ld int)
	axpyRows6    func(acc []float32, step int, p, v []float32, off int, rows []int32, ld, width int)
	scaleMax     func(x []float32, s float32) float32
	expShift     func(x []float32, m float32)
	prefetchRows func(w []float32, off int, rows []int32, ld, width int)
}

// axpyWidths are the lengths of acc that axpyRows takes, widest first.
var axpyWidths = [...]int{64, 48, 32, 16, 8}

var goAttnKernels = attnKernels{
	dotsRows8: func(x, w []float32, off int, rows []int32, ld, nb int, dst []float32) {
		for j := range 8 {
			at := int(rows[j])*ld + off
			dst[j] = dotGo(x, w[at:at+8*nb], nb)
		}
	},
	axpyRows:     axpyRowsGo,
	scaleMax:     scaleMaxGo,
	expShift:     expShiftGo,
	prefetchRows: func(w []float32, off int, rows []int32, ld, width int) {},
}

func scaleMaxGo(x []float32, s float32) float32 {
	m := float32(math.Inf(-1))
	for i, v := range x {
		x[i] = v * s
		m = max(m, x[i])
	}
	return m
}

// ones is the weight row that turns a dot product into a sum: fma(x, 1,
// s) is x+s rounded once, exactly an addition.
var ones [attnBlock]float32

func init() {
	for i := range ones {
		ones[i] = 1
	}
}

// laneSum returns the sum of x in the order of dot.go: eight lane sums,
// the fixed tree, then the last len(x) mod 8 values in order.
func laneSum(ks *kernelSet, x []float32) float32 {
	nb := len(x) / 8
	s := ks.f32.dots1x1(x, ones[:8*nb], nb)
	for _, v := range x[8*nb:] {
		s += v
	}
	return s
}

func axpyRowsGo(acc, p, v []float32, off int, rows []int32, ld int) {
	for t, r := range rows {
		vr := v[int(r)*ld+off : int(r)*ld+off+len(acc)]
		for d := range acc {
			acc[d] = fmaf(p[t], vr[d], acc[d])
		}
	}
}

// scoresRow sets dst[t] = dot(q, k[rows[t]*ld+off:]) (hd long) for every t,
// over a float32 cache with ks's kernels (scoresRowKV).
func scoresRow(ks *kernelSet, dst, q, k []float32, off int, rows []int32, ld, hd int) {
	kk := kvKernF32(ks)
	scoresRowKV(&kk, dst, q, k, off, rows, ld, hd)
}

// scoresRowKV sets dst[t] = dot(q, k[rows[t]*ld+off:]) (hd long) for every
// t: eight keys at a time, then one at a time, each a whole dot product.
func scoresRowKV[E float32 | uint16](kk *kvKern[E], dst, q []float32, k []E, off int, rows []int32, ld, hd int) {
	nb := hd / 8
	t := 0
	for ; t+8 <= len(rows); t += 8 {
		kk.dotsRows8(q, k, off, rows[t:t+8], ld, nb, dst[t:t+8])
	}
	for ; t < len(rows); t++ {
		at := int(rows[t])*ld + off
		dst[t] = kk.dots1x1(q, k[at:at+hd], nb)
	}
	if hd%8 != 0 {
		for t, r := range rows {
			at := int(r)*ld + off
			dst[t] = kk.dotTail(dst[t], q[:hd], k[at:at+hd], 8*nb)
		}
	}
}

// accumulateRow adds p[t]·v[rows[t]*ld+off:] (hd long) to acc for every t,
// over a float32 cache with ks's kernels (accumulateRowKV).
func accumulateRow(ks *kernelSet, acc, p, v []float32, off int, rows []int32, ld, hd int) {
	kk := kvKernF32(ks)
	accumulateRowKV(&kk, acc, p, v, off, rows, ld, hd)
}

// accumulateRowKV adds p[t]·v[rows[t]*ld+off:] (hd long) to acc for every
// t, in position order: the widest of axpyWidths that fits at a time, then
// one column at a time.
func accumulateRowKV[E float32 | uint16](kk *kvKern[E], acc, p []float32, v []E, off int, rows []int32, ld, hd int) {
	d := 0
	for _, w := range axpyWidths {
		for ; d+w <= hd; d += w {
			kk.axpyRows(acc[d:d+w], p, v, off+d, rows, ld)
		}
	}
	if d < hd {
		kk.axpyRowsGo(acc[d:hd], p, v, off+d, rows, ld)
	}
}

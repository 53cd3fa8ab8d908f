package cpu

import (
	"fmt"
	"unsafe"

	"kvlab/kernels"
)

// A KV cache in 16 bits.
//
// NewKV's tensors hold every key and value feature as a bfloat16 or an IEEE
// float16 bit pattern. WriteKV rounds to them (nearest, ties to even);
// attention's kernels widen each 16-bit value to float32 in registers, as
// they load it, and then run the very arithmetic of the float32 cache (one
// fused multiply-add chain per score and per output element, in the order
// of dot.go and attnkern.go). Widening is exact, so attention over a
// 16-bit cache has the bits of attention over a float32 cache holding the
// rounded values: what changes is the rounding WriteKV does, never the
// order of operations, and batch invariance holds as before.
//
// No block is widened into a scratch buffer: a decode step reads every
// cached key and value of its sequence once, and is bound by those reads,
// so reading half the bytes is the point.

var _ kernels.KVCacher = (*Backend)(nil)

// NewKV returns a zeroed rows×cols KV cache of dtype dt; KVF32 is New.
func (b *Backend) NewKV(rows, cols int, dt kernels.KVDType) kernels.Tensor {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpu: NewKV(%d, %d)", rows, cols))
	}
	switch dt {
	case kernels.KVF32:
		return b.New(rows, cols)
	case kernels.KVBF16, kernels.KVF16:
		return &Tensor{rows: rows, cols: cols, kv16: alignedHalves(rows * cols), kvdt: dt}
	}
	panic(fmt.Sprintf("cpu: NewKV of unknown dtype %v", dt))
}

// KVDTypeOf returns the dtype a tensor holds as a KV cache: KVF32 for any
// float32 tensor.
func KVDTypeOf(t kernels.Tensor) kernels.KVDType {
	if c := asWeight(t); c.kv16 != nil {
		return c.kvdt
	}
	return kernels.KVF32
}

// alignedHalves is alignedFloats for 16-bit values.
func alignedHalves(n int) []uint16 {
	if n == 0 {
		return []uint16{}
	}
	const pad = alignBytes / 2
	buf := make([]uint16, n+pad)
	off := 0
	if mis := int(uintptr(unsafe.Pointer(&buf[0])) % alignBytes); mis != 0 {
		off = (alignBytes - mis) / 2
	}
	return buf[off : off+n : off+n]
}

// widenKV sets dst[i] to src[i] of dtype dt, exactly.
func widenKV(dst []float32, src []uint16, dt kernels.KVDType) {
	src = src[:len(dst)]
	if dt == kernels.KVF16 {
		for i, h := range src {
			dst[i] = kernels.F16ToF32(h)
		}
		return
	}
	for i, h := range src {
		dst[i] = kernels.BF16ToF32(h)
	}
}

// narrowKV sets dst[i] to src[i] rounded to dtype dt and src[i] to the
// rounded value read back (see kernels.Backend.WriteKV).
func narrowKV(dst []uint16, src []float32, dt kernels.KVDType) {
	dst = dst[:len(src)]
	if dt == kernels.KVF16 {
		for i, f := range src {
			h := kernels.F32ToF16(f)
			dst[i], src[i] = h, kernels.F16ToF32(h)
		}
		return
	}
	for i, f := range src {
		h := kernels.F32ToBF16(f)
		dst[i], src[i] = h, kernels.BF16ToF32(h)
	}
}

// roundKV replaces every value of x by its rounding to dtype dt.
func roundKV(x []float32, dt kernels.KVDType) {
	for i, f := range x {
		x[i] = dt.Round(f)
	}
}

// kvCaches returns the caches kc and vc of op, which must be of one dtype.
func kvCaches(op string, kc, vc kernels.Tensor) (k, v *Tensor, dt kernels.KVDType) {
	k, v = asWeight(kc), asWeight(vc)
	if k.bf16 != nil || v.bf16 != nil {
		panic(fmt.Sprintf("cpu: %s: a bf16 weight is not a KV cache", op))
	}
	dt = KVDTypeOf(k)
	if KVDTypeOf(v) != dt {
		panic(fmt.Sprintf("cpu: %s: K cache of %v, V cache of %v", op, dt, KVDTypeOf(v)))
	}
	return k, v, dt
}

// kvRow returns row r of a 16-bit cache.
func (t *Tensor) kvRow(r int) []uint16 {
	return t.kv16[r*t.cols : (r+1)*t.cols : (r+1)*t.cols]
}

// kvKern is attention's inner loops (attnkern.go) over a cache of element
// type E: float32, or uint16 holding bfloat16 or float16 bits, which every
// kernel widens as it loads them. Each keeps the float32 kernel's order of
// operations, element for element.
//
//	dotsRows8, dots1x1, dotTail: scores (attnkern.go's dotsRows8, dot.go's
//	    dots1x1 and step 3)
//	axpyRows: accumulateRow's widths (axpyWidths); axpyRowsGo: any width
//	axpyRows6: accumulateRows' six rows at once; nil where there is none
//	prefetchRows: as attnKernels'
//	tiles: dot.go's kernels, for eight keys in consecutive rows (scoresRows);
//	    nil: dotsRows8 for every query row instead (the same bits)
type kvKern[E float32 | uint16] struct {
	dotsRows8    func(x []float32, w []E, off int, rows []int32, ld, nb int, dst []float32)
	dots1x1      func(x []float32, w []E, nb int) float32
	dotTail      func(r float32, x []float32, w []E, from int) float32
	axpyRows     func(acc, p []float32, v []E, off int, rows []int32, ld int)
	axpyRowsGo   func(acc, p []float32, v []E, off int, rows []int32, ld int)
	axpyRows6    func(acc []float32, step int, p []float32, v []E, off int, rows []int32, ld, width int)
	prefetchRows func(w []E, off int, rows []int32, ld, width int)
	tiles        *dotKernels[float32, E]
}

// kv16Kernels are the kernels a kernel set has for one 16-bit dtype; a set
// that leaves them out (a nil dotsRows8) runs the Go ones (goKV16).
type kv16Kernels struct {
	dotsRows8    func(x []float32, w []uint16, off int, rows []int32, ld, nb int, dst []float32)
	dots1x1      func(x []float32, w []uint16, nb int) float32
	axpyRows     func(acc, p []float32, v []uint16, off int, rows []int32, ld int)
	axpyRows6    func(acc []float32, step int, p []float32, v []uint16, off int, rows []int32, ld, width int)
	prefetchRows func(w []uint16, off int, rows []int32, ld, width int)
	// tiles says the set's bf16 weight kernels serve as scoresRows' tiles
	// (bf16 only: they widen bf16); ownTiles are tiles of the dtype's own,
	// when their dots3x4 is not nil (float16's).
	tiles    bool
	ownTiles dotKernels[float32, uint16]
}

// kvKernF32 returns ks's attention kernels over a float32 cache.
func kvKernF32(ks *kernelSet) kvKern[float32] {
	return kvKern[float32]{
		dotsRows8:    ks.attn.dotsRows8,
		dots1x1:      ks.f32.dots1x1,
		dotTail:      dotTail[float32, float32],
		axpyRows:     ks.attn.axpyRows,
		axpyRowsGo:   axpyRowsGo,
		axpyRows6:    ks.attn.axpyRows6,
		prefetchRows: ks.attn.prefetchRows,
		tiles:        &ks.f32,
	}
}

// kvKern16 returns ks's attention kernels over a cache of 16-bit dtype dt.
func kvKern16(ks *kernelSet, dt kernels.KVDType) kvKern[uint16] {
	k, tail, axpy := &ks.kvBF16, dotTailBF16, axpyRowsBF16
	if dt == kernels.KVF16 {
		k, tail, axpy = &ks.kvF16, dotTailF16, axpyRowsF16
	}
	if k.dotsRows8 == nil {
		k = &goKVBF16
		if dt == kernels.KVF16 {
			k = &goKVF16
		}
	}
	kk := kvKern[uint16]{
		dotsRows8:    k.dotsRows8,
		dots1x1:      k.dots1x1,
		dotTail:      tail,
		axpyRows:     k.axpyRows,
		axpyRowsGo:   axpy,
		axpyRows6:    k.axpyRows6,
		prefetchRows: k.prefetchRows,
	}
	switch {
	case k.ownTiles.dots3x4 != nil:
		kk.tiles = &k.ownTiles
	case k.tiles:
		kk.tiles = &ks.bf16
	}
	return kk
}

// goKVBF16 and goKVF16 are the portable 16-bit kernels.
var goKVBF16, goKVF16 = goKV16(kernels.KVBF16), goKV16(kernels.KVF16)

// The Go tails, one per dtype so that no call builds a closure.
func dotTailBF16(r float32, x []float32, w []uint16, from int) float32 {
	return dotTailWith(r, x, w, from, kernels.BF16ToF32)
}

func dotTailF16(r float32, x []float32, w []uint16, from int) float32 {
	return dotTailWith(r, x, w, from, kernels.F16ToF32)
}

func axpyRowsBF16(acc, p []float32, v []uint16, off int, rows []int32, ld int) {
	axpyRowsWith(acc, p, v, off, rows, ld, kernels.BF16ToF32)
}

func axpyRowsF16(acc, p []float32, v []uint16, off int, rows []int32, ld int) {
	axpyRowsWith(acc, p, v, off, rows, ld, kernels.F16ToF32)
}

// goKV16 returns the portable kernels for 16-bit dtype dt.
func goKV16(dt kernels.KVDType) kv16Kernels {
	widen := kernels.BF16ToF32
	if dt == kernels.KVF16 {
		widen = kernels.F16ToF32
	}
	k := kv16Kernels{
		dotsRows8: func(x []float32, w []uint16, off int, rows []int32, ld, nb int, dst []float32) {
			for j := range 8 {
				at := int(rows[j])*ld + off
				dst[j] = dotGoWith(x, w[at:at+8*nb], nb, widen)
			}
		},
		dots1x1: func(x []float32, w []uint16, nb int) float32 { return dotGoWith(x, w, nb, widen) },
		axpyRows: func(acc, p []float32, v []uint16, off int, rows []int32, ld int) {
			axpyRowsWith(acc, p, v, off, rows, ld, widen)
		},
		prefetchRows: func(w []uint16, off int, rows []int32, ld, width int) {},
	}
	k.tiles = dt == kernels.KVBF16
	return k
}

// dotGoWith is dotGo over 16-bit values that widen turns into float32.
func dotGoWith(x []float32, w []uint16, nb int, widen func(uint16) float32) float32 {
	x, w = x[:8*nb], w[:8*nb]
	var s [8]float32
	for k := 0; k < len(x); k += 8 {
		xs, ws := x[k:k+8:k+8], w[k:k+8:k+8]
		for l := range 8 {
			s[l] = fmaf(xs[l], widen(ws[l]), s[l])
		}
	}
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
}

// dotTailWith is dotTail over 16-bit values.
func dotTailWith(r float32, x []float32, w []uint16, from int, widen func(uint16) float32) float32 {
	for i := from; i < len(x); i++ {
		r = fmaf(x[i], widen(w[i]), r)
	}
	return r
}

// axpyRowsWith is axpyRowsGo over 16-bit values.
func axpyRowsWith(acc, p []float32, v []uint16, off int, rows []int32, ld int, widen func(uint16) float32) {
	for t, r := range rows {
		vr := v[int(r)*ld+off : int(r)*ld+off+len(acc)]
		for d := range acc {
			acc[d] = fmaf(p[t], widen(vr[d]), acc[d])
		}
	}
}

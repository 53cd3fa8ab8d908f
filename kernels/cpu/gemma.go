package cpu

import (
	"math"

	"kvlab/kernels"
)

// The element-wise operations of kernels.GemmaOps. Each element is computed
// on its own, so a row's values never depend on the rows beside it or on
// how the work is split.

var _ kernels.GemmaOps = (*Backend)(nil)

// GELUTanhMul computes dst = gelu_tanh(gate) * up element-wise, each
// element as geluMulGo (exp.go) defines it, eight at a time where the
// kernel set has assembly for it.
func (b *Backend) GELUTanhMul(dst, gate, up kernels.Tensor) {
	d, g, u := asCPU(dst), asCPU(gate), asCPU(up)
	sameShape("GELUTanhMul", d, g)
	sameShape("GELUTanhMul", d, u)
	b.rowChunks(d, func(lo, hi int) {
		kern.geluMul(d.Data[lo:hi], g.Data[lo:hi], u.Data[lo:hi])
	})
}

// softCap is limit·tanh(x/limit), each step rounded to float32 as PyTorch's
// float32 division, tanh and multiplication are.
func softCap(x, limit float32) float32 {
	return float32(math.Tanh(float64(x/limit))) * limit
}

// SoftCap replaces every element x of t by limit·tanh(x/limit).
func (b *Backend) SoftCap(t kernels.Tensor, limit float32) {
	c := asCPU(t)
	b.rowChunks(c, func(lo, hi int) {
		for i, x := range c.Data[lo:hi] {
			c.Data[lo+i] = softCap(x, limit)
		}
	})
}

// Scale multiplies t by s in place and rounds each product with round when
// it is not nil.
func (b *Backend) Scale(t kernels.Tensor, s float32, round func(float32) float32) {
	c := asCPU(t)
	b.rowChunks(c, func(lo, hi int) {
		for i, x := range c.Data[lo:hi] {
			p := x * s
			if round != nil {
				p = round(p)
			}
			c.Data[lo+i] = p
		}
	})
}

package cpu

import (
	"math"

	"kvlab/kernels"
)

// The element-wise operations of kernels.GemmaOps. Each element is computed
// on its own in float64 and rounded once to float32, so a row's values never
// depend on the rows beside it or on how the work is split.

var _ kernels.GemmaOps = (*Backend)(nil)

// geluTanh is the tanh approximation of GELU: 0.5·x·(1 + tanh(c·(x + 0.044715·x³)))
// with c = sqrt(2/π). Its float32 rounding defines GELUTanhMul's values;
// geluTanh32 computes that rounding faster.
func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(geluArg(x)))
}

// geluArg is the argument of geluTanh's tanh, c·(x + 0.044715·x³), one
// function so that both paths of geluTanh32 see the same bits.
func geluArg(x float64) float64 {
	const c = 0.7978845608028654 // sqrt(2/π)
	return c * (x + 0.044715*x*x*x)
}

// geluTanh32 returns float32(geluTanh(float64(x))), bit for bit, at less
// than half the cost (math.Tanh was a third of Gemma-3's prefill).
//
// 0.5·x·(1 + tanh(u)) is x/(1 + e^(-2u)), which takes one math.Exp and a
// division where math.Tanh takes a math.Exp, a division and its own
// branches. The two differ by rounding only: math.Tanh is within a few
// float64 ulps of tanh(u), the quotient within a few ulps of x·σ(2u), and
// |x·σ(2u)| ≤ |x|, so they are less than 1e-15·|x| apart. The fast value g
// is used when everything within 2^-46·|x| (≈ 1.4e-14·|x|, ten times that)
// of it rounds to the same float32, which then is geluTanh's float32 too;
// otherwise (a value near a float32 rounding boundary, a large negative x
// where 1 + tanh(u) cancels and geluTanh's own float64 rounding decides the
// float32, NaN, ±Inf) it computes geluTanh. The fast path was checked
// against geluTanh on all 2^32 float32 inputs (amd64): no difference; it
// answers for almost every activation (gelu_test.go).
func geluTanh32(x float32) float32 {
	if f, ok := geluTanhFast(x); ok {
		return f
	}
	return float32(geluTanh(float64(x)))
}

// geluTanhFast is geluTanh32's fast path; ok is false where it cannot
// vouch for its float32.
func geluTanhFast(x float32) (f float32, ok bool) {
	xf := float64(x)
	g := xf / (1 + math.Exp(-2*geluArg(xf)))
	e := math.Abs(xf) * 0x1p-46
	f = float32(g)
	return f, float32(g-e) == f && float32(g+e) == f
}

// GELUTanhMul computes dst = gelu_tanh(gate) * up element-wise.
func (b *Backend) GELUTanhMul(dst, gate, up kernels.Tensor) {
	d, g, u := asCPU(dst), asCPU(gate), asCPU(up)
	sameShape("GELUTanhMul", d, g)
	sameShape("GELUTanhMul", d, u)
	b.rowChunks(d, func(lo, hi int) {
		gd, ud, dd := g.Data[lo:hi], u.Data[lo:hi], d.Data[lo:hi]
		for i, gv := range gd {
			dd[i] = geluTanh32(gv) * ud[i]
		}
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

//go:build cuda || cudaemu

package cuda

import (
	"unsafe"

	"kvlab/kernels"
)

// The CUDA backend implements kernels.GemmaOps (src/gemma.cu), so model.Load
// accepts Gemma-3 on it.
var _ kernels.GemmaOps = (*Backend)(nil)

// GELUTanhMul computes dst = gelu_tanh(gate) * up element-wise.
func (b *Backend) GELUTanhMul(dst, gate, up kernels.Tensor) {
	d, g, u := asCUDA(dst), asCUDA(gate), asCUDA(up)
	sameShape("GELUTanhMul", d, g)
	sameShape("GELUTanhMul", d, u)
	n := d.elems()
	defer b.enter()()
	b.launch("GELUTanhMul", b.fn.geluTanhMul, elementwiseGrid(n, 4096), 1, 256,
		ptrArg(d), ptrArg(g), ptrArg(u), intArg(n))
}

// SoftCap replaces every element x of t by limit·tanh(x/limit), in place.
func (b *Backend) SoftCap(t kernels.Tensor, limit float32) {
	c := asCUDA(t)
	n := c.elems()
	defer b.enter()()
	b.launch("SoftCap", b.fn.softCap, elementwiseGrid(n, 4096), 1, 256, ptrArg(c), intArg(n), floatArg(limit))
}

// Scale multiplies every element of t by s in place. A round function (the
// embeddings' dtype: bf16 or f16) is Go code the GPU cannot run, so with one
// the products are computed and rounded on the host and copied back: the
// embedding rows of one step, a few KB per token, and the same float32
// products as the CPU backend's.
func (b *Backend) Scale(t kernels.Tensor, s float32, round func(float32) float32) {
	c := asCUDA(t)
	n := c.elems()
	if n == 0 {
		return
	}
	if round == nil {
		defer b.enter()()
		b.launch("Scale", b.fn.scale, elementwiseGrid(n, 4096), 1, 256, ptrArg(c), intArg(n), floatArg(s))
		return
	}
	h := b.ToHost(c, make([]float32, n))
	for i, x := range h {
		h[i] = round(x * s)
	}
	defer b.enter()()
	check("Scale", devHtoD(c.ptr, unsafe.Pointer(&h[0]), int64(4*n)))
	b.stage.idle() // a pageable upload first waits for the stream
}

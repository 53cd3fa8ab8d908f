package cpu

import (
	"fmt"

	"kvlab/kernels"
)

// FromHostBF16 returns a weight tensor that holds data as bfloat16: half
// the bytes of float32, which is what a decode step, streaming every weight
// once per token, is bound by. Each value is rounded to the nearest bf16
// (ties to even), so values read from a bf16 checkpoint are stored exactly.
//
// Such a tensor can be the weight w of MatMulT, which widens it in
// registers, or the table of Embed; ToHost and View work on it too. Every
// other operation panics on it. Widening is exact and MatMulT's order of
// operations does not depend on the weight type, so a product with a bf16
// weight has the same bits as with the same values held as float32.
func (b *Backend) FromHostBF16(rows, cols int, data []float32) kernels.Tensor {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		panic(fmt.Sprintf("cpu: FromHostBF16 %d×%d with %d values", rows, cols, len(data)))
	}
	h := kernels.F32sToBF16(data)
	if len(h) == 0 {
		return &Tensor{rows: rows, cols: cols, Data: []float32{}}
	}
	return &Tensor{rows: rows, cols: cols, bf16: h}
}

// WrapBF16 returns a weight tensor over bits, bfloat16 bit patterns in the
// host's byte order, without copying them: the weights of a bf16 checkpoint
// can then be the file's own bytes, mapped into memory. It can be used as
// FromHostBF16's tensors can. The backend only ever reads a weight, so bits
// may be read-only memory; the caller keeps it valid until the tensor is
// freed, and Free only drops the reference.
func (b *Backend) WrapBF16(rows, cols int, bits []uint16) kernels.Tensor {
	if rows < 0 || cols < 0 || len(bits) != rows*cols {
		panic(fmt.Sprintf("cpu: WrapBF16 %d×%d with %d values", rows, cols, len(bits)))
	}
	if len(bits) == 0 {
		return &Tensor{rows: rows, cols: cols, Data: []float32{}}
	}
	return &Tensor{rows: rows, cols: cols, bf16: bits}
}

// IsBF16 reports whether t holds bfloat16 values (see FromHostBF16).
func IsBF16(t kernels.Tensor) bool { return asWeight(t).bf16 != nil }

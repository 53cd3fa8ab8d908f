package kernels

import "math"

// bf16 is the top half of a float32, so widening is a shift. Narrowing
// rounds to nearest, ties to even, as PyTorch and the GPU's
// __float2bfloat16_rn do. The model writes checkpoints with these, and
// the backends narrow weights they hold as bf16 with them, so a value has
// the same bf16 everywhere.

// BF16ToF32 widens a bfloat16 bit pattern to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16 (ties to even). NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it quiet rather than round it into Inf
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F32sToBF16 rounds every value of data to bfloat16, as F32ToBF16 does:
// what a backend stores for a weight it holds as bf16.
func F32sToBF16(data []float32) []uint16 {
	h := make([]uint16, len(data))
	for i, v := range data {
		h[i] = F32ToBF16(v)
	}
	return h
}

package model

import (
	"kvlab/kernels"
)

// The bf16 and f16 conversions live in package kernels (kernels.BF16ToF32,
// kernels.F32ToBF16, kernels.F16ToF32, kernels.F32ToF16), shared with the
// backends that hold 16-bit weights and KV caches; these names stay for the
// checkpoint code that reads and writes f16 tensors.

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32 exactly
// (kernels.F16ToF32).
func F16ToF32(h uint16) float32 { return kernels.F16ToF32(h) }

// F32ToF16 rounds f to the nearest binary16, ties to even
// (kernels.F32ToF16).
func F32ToF16(f float32) uint16 { return kernels.F32ToF16(f) }

// RoundToDType returns f as stored in dtype ("F32", "BF16" or "F16") and
// read back: the value a checkpoint of that dtype actually holds.
func RoundToDType(f float32, dtype string) float32 {
	switch dtype {
	case DTypeBF16:
		return kernels.BF16ToF32(kernels.F32ToBF16(f))
	case DTypeF16:
		return F16ToF32(F32ToF16(f))
	default:
		return f
	}
}

package model

import (
	"kvlab/kernels"
	"math"
)

// bf16 conversions live in package kernels (kernels.BF16ToF32,
// kernels.F32ToBF16), shared with the backends that hold bf16 weights.

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32 exactly,
// including subnormals, infinities and NaN payloads.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		// Zero or subnormal: mant × 2⁻²⁴, exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	default:
		// Rebias the exponent from 15 to 127.
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	}
}

// F32ToF16 rounds f to the nearest binary16 (ties to even). Values beyond
// the largest half (65504, after rounding) become ±Inf; values below half
// the smallest subnormal become ±0.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		m := uint16(mant >> 13)
		if m == 0 {
			m = 0x200 // payload lost in the narrowing: keep it a NaN
		}
		return sign | 0x7c00 | m
	}
	e := exp - 127 + 15 // the half-precision biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half: value = m × 2⁻²⁴ with m = full mantissa >> (14-e).
		if e < -10 {
			return sign
		}
		full := mant | 0x800000
		shift := uint(14 - e)
		return sign | uint16(roundShift(full, shift))
	}
	// Normal: drop 13 mantissa bits. A carry out of the mantissa correctly
	// bumps the exponent (and turns 65520 and up into Inf).
	return sign | (uint16(e)<<10 + uint16(roundShift(mant, 13)))
}

// roundShift returns v >> shift rounded to nearest, ties to even.
func roundShift(v uint32, shift uint) uint32 {
	q := v >> shift
	rem := v & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

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

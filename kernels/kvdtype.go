package kernels

import (
	"fmt"
	"math"
	"strings"
)

// KVDType is the element type of a KV cache: what WriteKV stores a key or
// value feature as, and what Attend reads back. Activations stay float32
// whatever it is; only the cache narrows.
//
// A 16-bit cache halves the pool's memory, and so doubles the tokens a
// machine can hold, at the price of rounding every cached key and value
// once: bfloat16 keeps float32's exponent range and 8 significant bits,
// float16 keeps 11 significant bits over a range of ±65504 (subnormals down
// to 2⁻²⁴). Keys and values of a normalised transformer fit float16's range
// with room to spare, so float16 rounds about eight times finer.
type KVDType uint8

const (
	KVF32  KVDType = iota // float32: the cache holds exactly what the forward computed
	KVBF16                // bfloat16: the top half of a float32, rounded to nearest even
	KVF16                 // IEEE 754 binary16, rounded to nearest even
)

// KVDTypes lists the KV cache dtypes, in the order the flags offer them.
var KVDTypes = []KVDType{KVF32, KVBF16, KVF16}

// String returns the flag spelling: "f32", "bf16" or "f16".
func (d KVDType) String() string {
	switch d {
	case KVF32:
		return "f32"
	case KVBF16:
		return "bf16"
	case KVF16:
		return "f16"
	}
	return fmt.Sprintf("KVDType(%d)", uint8(d))
}

// Name returns PyTorch's name for the dtype ("float32", "bfloat16",
// "float16"): how a saved cache file records the dtype of its KV.
func (d KVDType) Name() string {
	switch d {
	case KVF32:
		return "float32"
	case KVBF16:
		return "bfloat16"
	case KVF16:
		return "float16"
	}
	return d.String()
}

// Bytes returns the size of one element.
func (d KVDType) Bytes() int {
	if d == KVF32 {
		return 4
	}
	return 2
}

// Round returns f as a cache of dtype d stores it and Attend reads it back.
func (d KVDType) Round(f float32) float32 {
	switch d {
	case KVBF16:
		return BF16ToF32(F32ToBF16(f))
	case KVF16:
		return F16ToF32(F32ToF16(f))
	}
	return f
}

// ParseKVDType reads a dtype as vLLM's --kv-cache-dtype and llama-server's
// -ctk/-ctv spell it: f32, bf16 or f16 (also float32, fp32, bfloat16,
// float16, fp16, half). vLLM's "auto" (the model's dtype) is not taken:
// this pool's reference dtype is float32 whatever the checkpoint's.
func ParseKVDType(s string) (KVDType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f32", "fp32", "float32":
		return KVF32, nil
	case "bf16", "bfloat16":
		return KVBF16, nil
	case "f16", "fp16", "float16", "half":
		return KVF16, nil
	}
	return KVF32, fmt.Errorf("unknown KV cache dtype %q (want f32, bf16 or f16)", s)
}

// KVCacher is an optional Backend method: KV caches held in 16 bits. A
// tensor NewKV returns with a 16-bit dtype can be the kc and vc of
// WriteKV, CopyBlock and Attend, and be viewed (View), read back (ToHost:
// widened exactly) and freed; other operations may panic on it. The
// backend narrows in WriteKV and widens where Attend reads a key or a
// value, so attention over a 16-bit cache computes what it computes over a
// float32 cache holding the rounded values (Round), bit for bit on the CPU
// backend.
type KVCacher interface {
	// NewKV returns a zeroed rows×cols KV cache tensor of dtype dt.
	NewKV(rows, cols int, dt KVDType) Tensor
}

// NewKV returns a zeroed rows×cols KV cache tensor of dtype dt on be:
// be.New for float32, otherwise be's KVCacher, or an error when be has
// none.
func NewKV(be Backend, rows, cols int, dt KVDType) (Tensor, error) {
	if dt == KVF32 {
		return be.New(rows, cols), nil
	}
	c, ok := be.(KVCacher)
	if !ok {
		return nil, fmt.Errorf("the %s backend has no %s KV cache (use --kv-cache-dtype f32)", be.Name(), dt)
	}
	return c.NewKV(rows, cols, dt), nil
}

// F16ToF32 widens an IEEE 754 binary16 bit pattern to float32 exactly,
// subnormals, infinities and NaN payloads included.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0: // zero or subnormal: mant × 2⁻²⁴, exact in float32
		return math.Float32frombits(sign | math.Float32bits(float32(mant)*(1.0/(1<<24))))
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13) // rebias 15 → 127
}

// F32ToF16 rounds f to the nearest binary16, ties to even, as the F16C
// instruction VCVTPS2PH and the GPU's __float2half_rn do: beyond 65520
// (the midpoint past the largest half, 65504) it is ±Inf, below 2⁻²⁵ ±0,
// in between subnormals where the exponent runs out. A NaN stays a quiet
// NaN with the top of its payload.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(mant>>13)
	}
	e := exp - 127 + 15 // the binary16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 { // below half the smallest subnormal, even after rounding
			return sign
		}
		// value = m × 2⁻²⁴ with m the full significand shifted down; a
		// carry out of the subnormal range lands on the smallest normal.
		return sign | uint16(roundShift(mant|0x800000, uint(14-e)))
	}
	// Drop 13 bits; a carry out of the mantissa bumps the exponent (and
	// 65520 and up into Inf), which is exactly the right result.
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

package kernels

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestF16Widen(t *testing.T) {
	for _, tt := range []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 0x1p-24}, {0x03ff, 1023 * 0x1p-24},
		{0x0400, 0x1p-14}, {0x8000, float32(math.Copysign(0, -1))},
	} {
		have := F16ToF32(tt.h)
		assert.Equal(t, math.Float32bits(tt.want), math.Float32bits(have), "F16ToF32(%#04x) = %v; want %v", tt.h, have, tt.want)
	}
	assert.True(t, math.IsInf(float64(F16ToF32(0xfc00)), -1))
	assert.True(t, math.IsNaN(float64(F16ToF32(0x7e01))))
}

// TestF16RoundsToNearestEven checks F32ToF16 at every binary16 value, at
// the float32 midpoint to the next one (a tie: to the even neighbour) and
// one float32 ulp either side of that midpoint, for both signs, and that
// every half survives the round trip.
func TestF16RoundsToNearestEven(t *testing.T) {
	for h := uint16(0); h < 0x7c00; h++ {
		lo, hi := float64(F16ToF32(h)), float64(F16ToF32(h+1)) // h+1 = 0x7c00 is +Inf
		if h == 0x7bff {
			hi = 65536 // where the next half would be: the rounding boundary is 65520
		}
		mid := float32((lo + hi) / 2) // exact: the midpoint of two halves fits float32
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		for _, sign := range []uint16{0, 0x8000} {
			s := float32(1)
			if sign != 0 {
				s = -1
			}
			cases := []struct {
				f    float32
				want uint16
			}{
				{s * float32(lo), h},
				{s * mid, even},
				{s * math.Nextafter32(mid, 0), h},
				{s * math.Nextafter32(mid, float32(math.Inf(1))), h + 1},
			}
			for _, c := range cases {
				if have := F32ToF16(c.f); have != sign|c.want {
					t.Fatalf("F32ToF16(%v): have %#04x; want %#04x", c.f, have, sign|c.want)
				}
			}
			if back := F32ToF16(F16ToF32(sign | h)); back != sign|h {
				t.Fatalf("round trip of %#04x: %#04x", sign|h, back)
			}
		}
	}
	assert.Equal(t, uint16(0x7c00), F32ToF16(float32(math.Inf(1))))
	assert.Equal(t, uint16(0x7c00), F32ToF16(1e10))
	assert.Equal(t, uint16(0x0000), F32ToF16(1e-10))
	assert.Equal(t, uint16(0x8000), F32ToF16(-1e-10))
	assert.Equal(t, uint16(0x7e00), F32ToF16(float32(math.NaN()))&0x7e00)
}

func TestKVDType(t *testing.T) {
	for _, d := range KVDTypes {
		p, err := ParseKVDType(d.String())
		require.NoError(t, err)
		assert.Equal(t, d, p)
		p, err = ParseKVDType(d.Name())
		require.NoError(t, err)
		assert.Equal(t, d, p)
	}
	_, err := ParseKVDType("q8_0")
	assert.ErrorContains(t, err, "want f32, bf16 or f16")
	assert.Equal(t, []int{4, 2, 2}, []int{KVF32.Bytes(), KVBF16.Bytes(), KVF16.Bytes()})
	x := float32(1.0009765625 + 1.0/4096) // 1 + 2⁻¹⁰ + 2⁻¹²: f16 keeps 2⁻¹⁰, bf16 only 2⁻⁷
	assert.Equal(t, x, KVF32.Round(x))
	assert.Equal(t, float32(1.0009765625), KVF16.Round(x))
	assert.Equal(t, float32(1), KVBF16.Round(x))
}

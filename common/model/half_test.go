package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestF16(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		h    uint16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0x0000},
		{"largest", 65504, 0x7bff},
		{"smallest normal", 1.0 / (1 << 14), 0x0400},
		{"smallest subnormal", 1.0 / (1 << 24), 0x0001},
		{"largest subnormal", 1023.0 / (1 << 24), 0x03ff},
		{"inf", float32(math.Inf(1)), 0x7c00},
		{"minus inf", float32(math.Inf(-1)), 0xfc00},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.h, F32ToF16(tt.f), "F32ToF16(%v): have %#04x; want %#04x", tt.f, F32ToF16(tt.f), tt.h)
			assert.Equal(t, tt.f, F16ToF32(tt.h), "F16ToF32(%#04x): have %v; want %v", tt.h, F16ToF32(tt.h), tt.f)
		})
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		want uint16
	}{
		{"tie rounds down to even", 1 + 1.0/(1<<11), 0x3c00},
		{"tie rounds up to even", 1 + 3.0/(1<<11), 0x3c02},
		{"above tie rounds up", 1 + 1.0/(1<<11) + 1.0/(1<<20), 0x3c01},
		{"rounds into inf", 65520, 0x7c00},
		{"stays finite below the tie", 65519, 0x7bff},
		{"huge", 1e10, 0x7c00},
		{"subnormal tie to even", 1.5 / (1 << 24), 0x0002},
		{"half the smallest subnormal is zero", 0.5 / (1 << 24), 0x0000},
		{"just above half the smallest subnormal", 0.5000001 / (1 << 24), 0x0001},
		{"tiny negative keeps its sign", -1e-30, 0x8000},
		{"subnormal rounds up into the normals", 1023.75 / (1 << 24), 0x0400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := F32ToF16(tt.f)
			assert.Equal(t, tt.want, have, "F32ToF16(%v): have %#04x; want %#04x", tt.f, have, tt.want)
		})
	}
}

// TestF16RoundTripAll checks every one of the 65536 half values survives
// widening and narrowing unchanged, NaNs included (as NaNs).
func TestF16RoundTripAll(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		back := F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x; want a NaN", h, back)
			}
			continue
		}
		if back != uint16(h) {
			t.Fatalf("%#04x → %v → %#04x; want %#04x", h, f, back, h)
		}
	}
}

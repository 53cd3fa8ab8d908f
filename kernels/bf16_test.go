package kernels

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBF16(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"exact", -2.5, 0xc020},
		{"tie rounds down to even", math.Float32frombits(0x3f808000), 0x3f80},
		{"tie rounds up to even", math.Float32frombits(0x3f818000), 0x3f82},
		{"above tie rounds up", math.Float32frombits(0x3f808001), 0x3f81},
		{"inf", float32(math.Inf(1)), 0x7f80},
		{"overflow rounds to inf", math.MaxFloat32, 0x7f80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := F32ToBF16(tt.f)
			assert.Equal(t, tt.want, have, "F32ToBF16(%v): have %#04x; want %#04x", tt.f, have, tt.want)
		})
	}
	nan := F32ToBF16(float32(math.NaN()))
	assert.True(t, math.IsNaN(float64(BF16ToF32(nan))), "NaN: have %#04x; want a NaN", nan)
	assert.Equal(t, float32(1.5), BF16ToF32(0x3fc0))
}

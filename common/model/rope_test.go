package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ulps is the distance between two float32 values in units in the last place.
func ulps(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

func TestInvFreq(t *testing.T) {
	// The want values are PyTorch's float32 results for HuggingFace's
	// formulas (computed with scripts/torch_reference.py's inv_freq).
	tests := []struct {
		name string
		cfg  Config
		want []float32
	}{
		{
			name: "default, theta 10000",
			cfg:  Config{HeadDim: 16, RopeTheta: 10000},
			want: []float32{1, 0.316227764, 0.100000001, 0.0316227786, 0.00999999978, 0.00316227786, 0.00100000005, 0.000316227786},
		},
		{
			name: "llama3 scaling, Llama 3.2 parameters",
			cfg: Config{HeadDim: 64, RopeTheta: 500000, RopeScaling: &RopeScaling{
				RopeType: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}},
			want: []float32{
				1, 0.663601279, 0.440366626, 0.292227834, 0.193922758, 0.128687382, 0.0853971019, 0.0566696189,
				0.0376060307, 0.0249554086, 0.0165604409, 0.0109895291, 0.00729266508, 0.00483942125, 0.00321144611, 0.00129054801,
				0.000429556705, 9.70828623e-05, 1.94616387e-05, 1.29147675e-05, 8.57025589e-06, 5.68723226e-06, 3.77405445e-06, 2.50446715e-06,
				1.66196742e-06, 1.10288363e-06, 7.31874934e-07, 4.85673127e-07, 3.22293289e-07, 2.1387423e-07, 1.41927202e-07, 9.41830649e-08,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := tt.cfg.InvFreq()
			require.Len(t, have, len(tt.want))
			for i := range have {
				assert.LessOrEqual(t, ulps(have[i], tt.want[i]), int64(1), "inv_freq[%d]: have %v; want %v", i, have[i], tt.want[i])
			}
		})
	}
}

// TestInvFreqLlama3Bands checks the three bands of the llama3 rescaling
// against their definitions rather than against numbers.
func TestInvFreqLlama3Bands(t *testing.T) {
	rs := &RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	plain := (&Config{HeadDim: 128, RopeTheta: 500000}).InvFreq()
	scaled := (&Config{HeadDim: 128, RopeTheta: 500000, RopeScaling: rs}).InvFreq()
	var kept, stretched, blended int
	for i := range plain {
		wavelen := 2 * math.Pi / float64(plain[i])
		switch {
		case wavelen < 8192/4: // high frequencies: untouched
			assert.Equal(t, plain[i], scaled[i], "i=%d: have %v; want %v", i, scaled[i], plain[i])
			kept++
		case wavelen > 8192/1: // low frequencies: divided by factor
			assert.Equal(t, plain[i]/8, scaled[i], "i=%d: have %v; want %v", i, scaled[i], plain[i]/8)
			stretched++
		default: // in between: strictly between the two
			assert.Less(t, scaled[i], plain[i], "i=%d", i)
			assert.Greater(t, scaled[i], plain[i]/8, "i=%d", i)
			blended++
		}
	}
	assert.Positive(t, kept)
	assert.Positive(t, stretched)
	assert.Positive(t, blended)
}

package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSampleSeedZeroIsASeed checks that Seed 0 is reproducible like any
// other seed (the zero value is not "random"): the tokens sampled with it
// from a flat distribution over 256 tokens are the same every time, and
// differ from those of Seed 1. A Sample that drew its own seed for 0 would
// repeat 64 draws from 256 tokens with probability 256⁻⁶⁴.
func TestSampleSeedZeroIsASeed(t *testing.T) {
	logits := make([]float32, 256)
	draws := func(seed uint64) []int32 {
		s := Sampling{Temperature: 1, Seed: seed}
		out := make([]int32, 64)
		for i := range out {
			out[i] = s.Sample(logits, i)
		}
		return out
	}
	zero := draws(0)
	require.Equal(t, zero, draws(0), "seed 0 is not reproducible")
	require.NotEqual(t, zero, draws(1), "seeds 0 and 1 draw the same tokens")
}

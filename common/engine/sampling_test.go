package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSampleGreedyTakesSmallestIndexOnTies(t *testing.T) {
	assert.Equal(t, int32(1), Sampling{}.Sample([]float32{0, 3, 3, -1}, 0))
}

func TestSampleTopPKeepsOnlyTheNucleus(t *testing.T) {
	// Probabilities ≈ 0.665, 0.245, 0.090: top-p 0.6 keeps only token 2.
	logits := []float32{1, 0, 2}
	s := Sampling{Temperature: 1, TopP: 0.6}
	for i := range 200 {
		s.Seed = uint64(i)
		require.Equal(t, int32(2), s.Sample(logits, i), "seed %d", i)
	}
}

func TestSampleFollowsTheDistribution(t *testing.T) {
	// Two tokens with probabilities 0.25 and 0.75 (logit gap ln 3).
	logits := []float32{0, 1.0986123}
	s := Sampling{Temperature: 1, Seed: 9}
	ones := 0
	const n = 4000
	for i := range n {
		if s.Sample(logits, i) == 1 {
			ones++
		}
	}
	assert.InDelta(t, 0.75, float64(ones)/n, 0.03, "have %d/%d ones; want about 75%%", ones, n)
}

func TestSampleIsAFunctionOfSeedAndIndex(t *testing.T) {
	logits := []float32{0.1, 0.2, 0.3, 0.4, 0.5}
	s := Sampling{Temperature: 2, Seed: 5}
	for i := range 20 {
		assert.Equal(t, s.Sample(logits, i), s.Sample(logits, i))
	}
}

func TestSamplingValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Sampling
		want string
	}{
		{Sampling{Temperature: -0.1}, "temperature"},
		{Sampling{TopP: -0.5}, "top-p"},
		{Sampling{TopP: 1.01}, "top-p"},
	} {
		require.ErrorContains(t, tc.s.Validate(), tc.want)
	}
	require.NoError(t, Sampling{Temperature: 0.7, TopP: 0.95}.Validate())
}

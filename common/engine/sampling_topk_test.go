package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTopKAgreesWithTheSort: the heap's TopK are the first TopK of the
// whole vocabulary weighed and sorted, token for token and weight for
// weight, on logits with ties, banned tokens and weights that underflow
// to 0. nucleus sums and cuts them as it does the sorted slice, so Sample
// draws the same tokens either way.
func TestTopKAgreesWithTheSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(3000)
		logits := make([]float32, n)
		for i := range logits {
			switch rng.IntN(10) {
			case 0:
				logits[i] = float32(math.Inf(-1))
			case 1:
				logits[i] = 3 // many ties
			case 2:
				logits[i] = -1e4 // weight 0 after exp
			default:
				logits[i] = float32(rng.NormFloat64() * 4)
			}
		}
		s := Sampling{Temperature: 0.2 + rng.Float64(), TopK: 1 + rng.IntN(min(n, 60)), Seed: uint64(trial)}
		if s.TopK >= n {
			continue
		}
		all, _ := s.weights(logits)
		slices.SortFunc(all, byWeight)
		require.Equal(t, all[:s.TopK], s.topK(logits), "trial %d: n %d, k %d", trial, n, s.TopK)
	}
}

// BenchmarkSampleTopK is one sampled token over a Qwen3-sized vocabulary,
// with llama-server's default top-k of 40, and with none (every token
// weighed and sorted).
func BenchmarkSampleTopK(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	for _, k := range []int{1, 40, 0} {
		s := Sampling{Temperature: 0.8, TopK: k, TopP: 0.95, Seed: 1}
		b.Run(fmt.Sprintf("top_k=%d", k), func(b *testing.B) {
			for i := range b.N {
				s.Sample(logits, i)
			}
		})
	}
}

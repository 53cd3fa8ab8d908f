package engine

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

// TestLogitBiasMovesTheSample: a bias is added to the logits before
// greedy or sampled selection, -Inf bans a token, and the caller's logits
// are left as they were (they may be reported to the client).
func TestLogitBiasMovesTheSample(t *testing.T) {
	logits := []float32{0, 3, 1}
	orig := append([]float32(nil), logits...)
	assert.Equal(t, int32(1), Sampling{}.Sample(logits, 0))
	assert.Equal(t, int32(2), Sampling{LogitBias: []Bias{{1, -100}}}.Sample(logits, 0))
	assert.Equal(t, int32(0), Sampling{LogitBias: []Bias{{0, 100}}}.Sample(logits, 0))
	banned := Sampling{Temperature: 1, LogitBias: []Bias{{1, float32(math.Inf(-1))}, {2, float32(math.Inf(-1))}}}
	for i := range 50 {
		banned.Seed = uint64(i)
		require.Equal(t, int32(0), banned.Sample(logits, i), "seed %d: only token 0 is left", i)
	}
	assert.Equal(t, orig, logits)
	assert.False(t, Sampling{LogitBias: []Bias{{1, 1}}}.Greedy(), "a biased request needs its logits on the host")
	assert.Error(t, Sampling{LogitBias: []Bias{{1, float32(math.NaN())}}}.Validate())
}

// TestLogitBiasInABatch: a request whose bias forces a token gets it at
// every position while a request beside it in the same steps is decoded
// as it would be alone; a bias outside the vocabulary is refused.
func TestLogitBiasInABatch(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	require.Error(t, e.Submit(Request{ID: 9, Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{LogitBias: []Bias{{int32(m.Config.VocabSize), 1}}}}))
	plain := Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 4, IgnoreEOS: true}
	alone := e.RunAll([]Request{plain})[1]
	require.NoError(t, alone.Err)
	forced := Request{ID: 2, Prompt: []int32{1, 2, 3}, MaxTokens: 4, IgnoreEOS: true, Sampling: Sampling{LogitBias: []Bias{{7, 100}}}}
	res := e.RunAll([]Request{plain, forced})
	require.NoError(t, res[2].Err)
	assert.Equal(t, []int32{7, 7, 7, 7}, res[2].Tokens)
	assert.Equal(t, alone.Tokens, res[1].Tokens)
}

// TestSampledProbsAreTheDrawsDistribution: post-sampling probabilities
// are those top-p keeps, renormalised, after temperature and bias; greedy
// gives its one token probability 1; and a request asking for them gets
// them on its outputs.
func TestSampledProbsAreTheDrawsDistribution(t *testing.T) {
	// Probabilities ≈ 0.665, 0.245, 0.090 at temperature 1: top-p 0.8
	// keeps tokens 2 and 0.
	logits := []float32{1, 0, 2}
	s := Sampling{Temperature: 1, TopP: 0.8}
	p, top := s.SampledProbs(logits, 0, 5)
	require.Len(t, top, 2)
	e2, e1 := math.Exp(2), math.Exp(1)
	assert.Equal(t, int32(2), top[0].ID)
	assert.InDelta(t, e2/(e2+e1), top[0].Prob, 1e-6)
	assert.InDelta(t, e1/(e2+e1), p, 1e-6)
	p, _ = s.SampledProbs(logits, 1, 5)
	assert.Zero(t, p, "token 1 is outside the nucleus")
	p, top = Sampling{LogitBias: []Bias{{1, 10}}}.SampledProbs(logits, 1, 3)
	assert.Equal(t, float32(1), p)
	assert.Equal(t, []TokenProb{{1, 1}}, top)

	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	require.NoError(t, e.Submit(Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 3, IgnoreEOS: true, TopProbs: 4, PostSamplingProbs: true,
		Sampling: Sampling{Temperature: 0.7, TopP: 0.9, Seed: 4}}))
	n := 0
	for e.Busy() {
		for _, o := range e.Step() {
			require.NotEmpty(t, o.Top)
			var sum float32
			for _, tp := range o.Top {
				assert.Greater(t, tp.Prob, float32(0))
				sum += tp.Prob
			}
			assert.LessOrEqual(t, sum, float32(1.0001))
			assert.Greater(t, o.Prob, float32(0), "the drawn token was in the nucleus")
			n++
		}
	}
	assert.Equal(t, 3, n)
}

// TestTopKKeepsTheMostLikely: top-k 1 always draws the most likely token;
// top-k 2 draws only the two most likely, and top-p then measures their
// renormalised probabilities (0.622 and 0.378 here: top-p 0.6 keeps one).
func TestTopKKeepsTheMostLikely(t *testing.T) {
	logits := []float32{1, 0, 2, 1.5}
	for i := range 100 {
		s := Sampling{Temperature: 1.5, TopK: 1, Seed: uint64(i)}
		require.Equal(t, int32(2), s.Sample(logits, i), "seed %d", i)
	}
	seen := map[int32]bool{}
	for i := range 300 {
		seen[Sampling{Temperature: 1, TopK: 2, Seed: uint64(i)}.Sample(logits, i)] = true
	}
	assert.Equal(t, map[int32]bool{2: true, 3: true}, seen)
	p, top := Sampling{Temperature: 1, TopK: 2, TopP: 0.6}.SampledProbs(logits, 2, 4)
	assert.Equal(t, float32(1), p)
	assert.Len(t, top, 1, "of the two, top-p 0.6 keeps the first")
	assert.Error(t, Sampling{TopK: -1}.Validate())
}

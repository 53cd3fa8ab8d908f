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

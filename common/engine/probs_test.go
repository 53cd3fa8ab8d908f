package engine

import (
	"context"
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

// TestTopProbsMatchesAFullSort checks topProbs against the plain way: the
// whole softmax in float64, sorted.
func TestTopProbsMatchesAFullSort(t *testing.T) {
	logits := []float32{0.5, 2, -1, 2, 7, 3.5, 0, 3.5, -40}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l))
	}
	want := make([]TokenProb, len(logits))
	for i, l := range logits {
		want[i] = TokenProb{int32(i), float32(math.Exp(float64(l)) / sum)}
	}
	sort.SliceStable(want, func(a, b int) bool { return want[a].Prob > want[b].Prob })
	for _, n := range []int{1, 3, 4, len(logits), len(logits) + 5} {
		p, top := topProbs(logits, 5, n)
		require.Len(t, top, min(n, len(logits)))
		for i := range top {
			assert.Equal(t, want[i].ID, top[i].ID, "n=%d rank %d", n, i)
			assert.InDelta(t, want[i].Prob, top[i].Prob, 1e-6, "n=%d rank %d", n, i)
		}
		assert.InDelta(t, float64(want[1].Prob), float64(p), 1e-6, "token 5 is the second most probable")
	}
}

// TestTopProbsRideOnTheOutput runs a greedy request that asks for them: the
// token is the most probable one, and its probability is the first listed.
func TestTopProbsRideOnTheOutput(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	require.Error(t, e.Submit(Request{ID: 9, Prompt: []int32{1}, MaxTokens: 1, TopProbs: MaxTopProbs + 1}))
	require.NoError(t, e.Submit(Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 4, IgnoreEOS: true, TopProbs: 3}))
	n := 0
	for e.Busy() {
		for _, o := range e.Step() {
			require.Len(t, o.Top, 3)
			assert.Equal(t, o.Token, o.Top[0].ID, "greedy takes the most probable token")
			assert.Equal(t, o.Prob, o.Top[0].Prob)
			assert.GreaterOrEqual(t, o.Top[0].Prob, o.Top[1].Prob)
			n++
		}
	}
	assert.Equal(t, 4, n)
}

func TestDoRunsOnTheLoopAndRefusesOnceStopped(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	srv := NewServer(newTestEngine(t, m, testConfig()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()

	var free int
	require.NoError(t, srv.Do(func(e *Engine) error { free = e.Pool().Allocator().NumFree(); return nil }))
	assert.Equal(t, srv.Snapshot().FreeBlocks, free)
	cancel()
	<-done
	assert.ErrorIs(t, srv.Do(func(*Engine) error { t.Error("ran after the loop stopped"); return nil }), ErrStopped)
}

package engine

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

func TestForkedSamplesEqualSingleSampleRuns(t *testing.T) {
	m := loadTestModel(t, model.ArchQwen3)
	for _, tc := range []struct {
		promptLen  int
		wantCopies int
	}{
		{10, 3}, // block size 4: the last prompt block holds 2 tokens, shared by 4 samples
		{8, 0},  // block-aligned prompt: every sample starts a block of its own
	} {
		t.Run(fmt.Sprintf("prompt=%d", tc.promptLen), func(t *testing.T) {
			prompt := make([]int32, tc.promptLen)
			for i := range prompt {
				prompt[i] = int32(3*i + 1)
			}
			s := Sampling{Temperature: 1.5, Seed: 100}
			e := newTestEngine(t, m, testConfig())
			res := e.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: s, N: 4}})[1]
			require.NoError(t, res.Err)
			require.Len(t, res.Samples, 4)

			for i, got := range res.Samples {
				alone := s
				alone.Seed += uint64(i)
				want := solo(t, m, testConfig(), []Request{{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: alone}})[1]
				assert.Equal(t, want.Tokens, got, "sample %d vs a single request with seed %d", i, alone.Seed)
			}
			assert.Equal(t, tc.wantCopies, e.Pool().Copies(), "copy-on-write copies")
			assert.Equal(t, 3, e.Stats().Forks)
			assert.Equal(t, 0, e.Pool().UsedBlocks())
		})
	}
}

func TestForksSaveBlocks(t *testing.T) {
	// Four samples of one 30-token prompt hold the prompt once; four
	// separate requests hold it four times.
	m := loadTestModel(t, model.ArchLlama)
	prompt := make([]int32, 30)
	for i := range prompt {
		prompt[i] = int32(i + 5)
	}
	s := Sampling{Temperature: 1, Seed: 1}
	forked := newTestEngine(t, m, testConfig())
	forked.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 4, IgnoreEOS: true, Sampling: s, N: 4}})

	separate := newTestEngine(t, m, testConfig())
	var reqs []Request
	for i := range 4 {
		r := Request{ID: i, Prompt: prompt, MaxTokens: 4, IgnoreEOS: true, Sampling: s}
		r.Sampling.Seed += uint64(i)
		reqs = append(reqs, r)
	}
	separate.RunAll(reqs)

	// Forked: the 7 full prompt blocks once, and per sample its own copy
	// of the half-full 8th block plus one block for positions 32-33.
	assert.Equal(t, 7+4*2, forked.Stats().PeakBlocks)
	assert.Less(t, forked.Stats().PeakBlocks, separate.Stats().PeakBlocks)
	t.Logf("peak blocks: forked %d, separate %d", forked.Stats().PeakBlocks, separate.Stats().PeakBlocks)
}

func TestSamplesOutOfRangeAreRejected(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	require.ErrorContains(t, e.Submit(Request{ID: 1, Prompt: []int32{1}, MaxTokens: 1, N: MaxSamples + 1}), "samples")
	require.ErrorContains(t, e.Submit(Request{ID: 1, Prompt: []int32{1}, MaxTokens: 1, N: -1}), "samples")
}

func TestForksUnderMemoryPressure(t *testing.T) {
	// Four samples of a prompt whose last block is shared, in a pool too
	// small for all of them to decode at once: copy-on-write blocks are
	// taken while scheduling, so preemption can make room for them.
	m := loadTestModel(t, model.ArchLlama)
	prompt := []int32{9, 8, 7, 6, 5, 4, 3, 2, 1, 11}
	s := Sampling{Temperature: 1, Seed: 3}
	c := testConfig()
	c.NumBlocks = 5 // the prompt's 3 blocks, and 2 to share among 4 samples
	e := newTestEngine(t, m, c)
	res := e.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: s, N: 4}})[1]
	require.NoError(t, res.Err)
	assert.Positive(t, e.Stats().Preemptions, "the pool must have run dry")
	for i, got := range res.Samples {
		alone := s
		alone.Seed += uint64(i)
		want := solo(t, m, testConfig(), []Request{{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: alone}})[1]
		assert.Equal(t, want.Tokens, got, "sample %d", i)
	}
	assert.Equal(t, 0, e.Pool().UsedBlocks())
}

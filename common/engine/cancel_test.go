package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

// TestCancelEndsARequestWhereverItIs cancels a request at each point of its
// life and checks that it ends at once with one "cancelled" event per
// sample, that its blocks go back to the pool, and that the request beside
// it produces exactly what it produces alone.
func TestCancelEndsARequestWhereverItIs(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	rng := rand.New(rand.NewPCG(3, 4))
	other := Request{ID: 1, Prompt: randomPrompt(rng, 12, m.Config.VocabSize), MaxTokens: 10, IgnoreEOS: true, KeepLogits: true}
	want := solo(t, m, testConfig(), []Request{other})

	cases := []struct {
		name     string
		victim   Request
		steps    int  // steps before the cancel
		maxRun   int  // MaxRunning; 1 keeps the victim waiting
		wantRows bool // the victim produced tokens before the cancel
	}{
		{"waiting", Request{ID: 2, Prompt: randomPrompt(rng, 9, m.Config.VocabSize), MaxTokens: 5}, 1, 1, false},
		{"prefilling", Request{ID: 2, Prompt: randomPrompt(rng, 150, m.Config.VocabSize), MaxTokens: 5}, 1, 16, false},
		{"decoding", Request{ID: 2, Prompt: randomPrompt(rng, 6, m.Config.VocabSize), MaxTokens: 50, IgnoreEOS: true}, 4, 16, true},
		{"samples before the fork", Request{ID: 2, Prompt: randomPrompt(rng, 150, m.Config.VocabSize), MaxTokens: 5, N: 3, Sampling: Sampling{Temperature: 1, Seed: 9}}, 1, 16, false},
		{"samples after the fork", Request{ID: 2, Prompt: randomPrompt(rng, 6, m.Config.VocabSize), MaxTokens: 50, N: 3, Sampling: Sampling{Temperature: 1, Seed: 9}, IgnoreEOS: true}, 4, 16, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.MaxRunning = tc.maxRun
			e := newTestEngine(t, m, c)
			res := map[int]*Result{1: {}, 2: {}}
			require.NoError(t, e.Submit(other))
			require.NoError(t, e.Submit(tc.victim))
			for range tc.steps {
				e.collect(res, e.Step())
			}
			assert.Equal(t, tc.wantRows, len(res[2].Tokens) > 0, "tokens before the cancel: have %v", res[2].Tokens)

			require.True(t, e.Cancel(2))
			require.False(t, e.Cancel(2), "a cancelled request is no longer live")
			assert.Zero(t, e.Pool().Live()-1, "only the other request's sequence stays open")

			var ends []Output
			for e.Busy() {
				outs := e.Step()
				for _, o := range outs {
					if o.ID == 2 {
						ends = append(ends, o)
					}
				}
				e.collect(res, outs)
			}
			require.Len(t, ends, tc.victim.samples(), "one last event per sample")
			for i, o := range ends {
				assert.True(t, o.Done)
				assert.Equal(t, "cancelled", o.Reason)
				assert.NoError(t, o.Err)
				assert.Equal(t, i, o.Sample)
			}
			assert.Equal(t, want[1].Tokens, res[1].Tokens, "the other request is unaffected")
			assert.Equal(t, want[1].Logits, res[1].Logits)
			assert.Equal(t, 0, e.Pool().UsedBlocks(), "every block is back")
			require.NoError(t, e.Pool().Audit().Err())
			assert.Equal(t, 1, e.Stats().Cancelled)
		})
	}
}

func TestCancelUnknownRequestIsANoOp(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	assert.False(t, e.Cancel(42))
	assert.False(t, e.Busy())
	assert.Equal(t, 0, e.Stats().Cancelled)
}

func TestSamplesOutgrowingThePoolEndOnce(t *testing.T) {
	// Three samples whose outputs cannot all fit at once: every sample's
	// stream still ends exactly once, or a front end waiting for it hangs;
	// and since each sample alone fits the pool (the context is what the
	// pool holds), preemption takes turns and none fails.
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.NumBlocks = 4 // 16 slots: one sample fits, three cannot
	e := newTestEngine(t, m, c)
	require.NoError(t, e.Submit(Request{ID: 1, Prompt: make([]int32, 9), MaxTokens: 20, IgnoreEOS: true, N: 3, Sampling: Sampling{Temperature: 1}}))
	done := map[int]bool{}
	for e.Busy() {
		for _, o := range e.Step() {
			if o.Done {
				assert.False(t, done[o.Sample], "sample %d ended twice", o.Sample)
				done[o.Sample] = true
			}
		}
	}
	assert.Equal(t, map[int]bool{0: true, 1: true, 2: true}, done)
	assert.Positive(t, e.Stats().Preemptions, "the pool must have been too small for all three")
	assert.Zero(t, e.Stats().Failed)
	assert.Equal(t, 0, e.Pool().UsedBlocks())
}

// TestDeadlockEndsInAnError: an engine that can never schedule a live
// request (here: no running slot at all, which Validate would refuse) must
// not keep the loops that step it spinning: after MaxIdleSteps steps that
// did nothing, every live request ends with an error naming the deadlock,
// and RunAll returns.
func TestDeadlockEndsInAnError(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	e.cfg.MaxRunning = 0
	res := e.RunAll([]Request{{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 2, N: 2}, {ID: 2, Prompt: []int32{4}, MaxTokens: 2}})
	for id := 1; id <= 2; id++ {
		require.ErrorContains(t, res[id].Err, "no progress in 1000 steps", "request %d", id)
	}
	assert.False(t, e.Busy())
	assert.Zero(t, e.Pool().Live())
	assert.Zero(t, e.Stats().Steps, "no step ran a forward pass")
}

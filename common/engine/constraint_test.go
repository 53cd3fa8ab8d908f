package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

// countConstraint is a fake Constraint whose language is easy to check
// without it: exactly n tokens, each in the set ok, then the end.
type countConstraint struct {
	ok   func(int32) bool
	n    int
	seen []int32
	// accepts counts Accept calls on this state, so a test can see that
	// clones do not share one.
	accepts   *int
	alternate bool
}

func (c *countConstraint) Allowed(dst []uint64) []uint64 {
	if len(c.seen) >= c.n {
		return dst
	}
	for i := range len(dst) * 64 {
		if c.allows(int32(i)) {
			dst[i/64] |= 1 << (i % 64)
		}
	}
	return dst
}

func (c *countConstraint) Accept(tok int32) bool {
	if len(c.seen) >= c.n || !c.allows(tok) {
		return false
	}
	c.seen = append(c.seen, tok)
	*c.accepts++
	return true
}

// allows is ok, and with alternate set, the low half of the set at even
// positions and the high half at odd ones: a language whose next tokens
// depend on the state.
func (c *countConstraint) allows(tok int32) bool {
	if c.alternate && (tok < 300) != (len(c.seen)%2 == 0) {
		return false
	}
	return c.ok(tok)
}

func (c *countConstraint) CanEnd() bool { return len(c.seen) == c.n }

func (c *countConstraint) Clone() Constraint {
	d := *c
	d.seen = append([]int32(nil), c.seen...)
	d.accepts = new(int)
	return &d
}

func newCount(n int, ok func(int32) bool) *countConstraint {
	return &countConstraint{ok: ok, n: n, accepts: new(int)}
}

// inSet is the fake's language, written separately from it: ids 40-59
// and 300-309.
func inSet(t int32) bool { return t >= 40 && t < 60 || t >= 300 && t < 310 }

// withEOS declares token eos the model's end-of-sequence token for the
// engines built inside f.
func withEOS(m *model.Model, eos int32, f func()) {
	old := m.Config.EOSTokenIDs
	m.Config.EOSTokenIDs = []int32{eos}
	defer func() { m.Config.EOSTokenIDs = old }()
	f()
}

// TestConstraintHoldsUnderEverySampler: over many seeds and every sampler
// setting each token is in the constraint's language, generation ends
// with the end-of-sequence token exactly when the constraint can end (even
// with IgnoreEOS, when nothing else is allowed), and a logit bias that
// bans some allowed tokens keeps them out.
func TestConstraintHoldsUnderEverySampler(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	const eos = 2
	samplers := []Sampling{
		{},
		{Temperature: 1},
		{Temperature: 2, TopK: 5},
		{Temperature: 1.5, TopP: 0.5},
		{Temperature: 0.7, TopK: 40, TopP: 0.9},
		{Temperature: 1, LogitBias: []Bias{{300, 50}}},
	}
	withEOS(m, eos, func() {
		e := newTestEngine(t, m, testConfig())
		for si, smp := range samplers {
			for seed := range 8 {
				smp.Seed = uint64(seed)
				for _, ignore := range []bool{false, true} {
					name := fmt.Sprintf("sampler %d seed %d ignoreEOS %v", si, seed, ignore)
					res := e.RunAll([]Request{{ID: 1, Prompt: []int32{5, 6, 7, 8, 9}, MaxTokens: 20, IgnoreEOS: ignore, Sampling: smp, Constraint: newCount(6, inSet)}})[1]
					require.NoError(t, res.Err, name)
					require.Len(t, res.Tokens, 7, name)
					for _, tok := range res.Tokens[:6] {
						require.True(t, inSet(tok), "%s: token %d", name, tok)
					}
					assert.Equal(t, int32(eos), res.Tokens[6], name)
					assert.Equal(t, "eos", res.Reason, name)
					if si == len(samplers)-1 {
						assert.Equal(t, []int32{300, 300, 300, 300, 300, 300}, res.Tokens[:6], "%s: the bias picks among allowed tokens", name)
					}
				}
			}
		}
		// A ban on some allowed tokens keeps them out.
		ban := []Bias{}
		for tok := int32(40); tok < 60; tok++ {
			ban = append(ban, Bias{tok, float32(math.Inf(-1))})
		}
		for seed := range 10 {
			res := e.RunAll([]Request{{ID: 1, Prompt: []int32{5, 6}, MaxTokens: 4, Sampling: Sampling{Temperature: 3, Seed: uint64(seed), LogitBias: ban}, Constraint: newCount(10, inSet)}})[1]
			require.NoError(t, res.Err)
			for _, tok := range res.Tokens {
				require.True(t, tok >= 300 && tok < 310, "seed %d: token %d", seed, tok)
			}
		}
	})
}

// TestConstraintDeadEndFails: a constraint that allows nothing and cannot
// end fails its request with ErrConstraintDead at once, instead of
// sampling a forbidden token or looping; so does one whose every allowed
// token the logit bias bans, and one that may only end on a model with no
// end-of-sequence token. A request beside it is untouched.
func TestConstraintDeadEndFails(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	e := newTestEngine(t, m, testConfig())
	none := func(int32) bool { return false }
	only7 := func(t int32) bool { return t == 7 }
	plain := Request{ID: 9, Prompt: []int32{1, 2, 3}, MaxTokens: 5, IgnoreEOS: true}
	alone := e.RunAll([]Request{plain})[9]
	for name, r := range map[string]Request{
		"allows nothing":  {ID: 1, Prompt: []int32{1, 2}, MaxTokens: 5, Constraint: newCount(3, none)},
		"bias bans all":   {ID: 1, Prompt: []int32{1, 2}, MaxTokens: 5, Sampling: Sampling{LogitBias: []Bias{{7, float32(math.Inf(-1))}}}, Constraint: newCount(3, only7)},
		"n=2, allow none": {ID: 1, Prompt: []int32{1, 2}, MaxTokens: 5, N: 2, Sampling: Sampling{Temperature: 1}, Constraint: newCount(3, none)},
	} {
		res := e.RunAll([]Request{r, plain})
		assert.ErrorIs(t, res[1].Err, ErrConstraintDead, name)
		assert.Equal(t, "error", res[1].Reason, name)
		assert.Equal(t, alone.Tokens, res[9].Tokens, name)
		assert.False(t, e.Busy(), name)
	}
	eos := m.Config.EOSTokenIDs
	m.Config.EOSTokenIDs = nil
	defer func() { m.Config.EOSTokenIDs = eos }()
	e = newTestEngine(t, m, testConfig())
	res := e.RunAll([]Request{{ID: 1, Prompt: []int32{1, 2}, MaxTokens: 5, Constraint: newCount(2, only7)}})[1]
	assert.ErrorIs(t, res.Err, ErrConstraintDead, "may only end, on a model without an end-of-sequence token")
	assert.Equal(t, []int32{7, 7}, res.Tokens, "the allowed tokens come out before the dead end")
}

// TestConstrainedRequestLeavesItsBatchAlone: an unconstrained request
// gives the same tokens and logits, bit for bit, alone and in a batch with
// constrained ones (greedy and sampled).
func TestConstrainedRequestLeavesItsBatchAlone(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	for _, smp := range []Sampling{{}, {Temperature: 0.9, TopP: 0.95, Seed: 3}} {
		free := Request{ID: 1, Prompt: []int32{3, 1, 4, 1, 5}, MaxTokens: 8, IgnoreEOS: true, Sampling: smp, KeepLogits: true}
		alone := solo(t, m, testConfig(), []Request{free})[1]
		e := newTestEngine(t, m, testConfig())
		res := e.RunAll([]Request{
			free,
			{ID: 2, Prompt: []int32{3, 1, 4, 1, 5}, MaxTokens: 8, IgnoreEOS: true, Sampling: Sampling{Temperature: 1, Seed: 5}, Constraint: newCount(100, inSet)},
			{ID: 3, Prompt: []int32{2, 7}, MaxTokens: 8, IgnoreEOS: true, N: 3, Sampling: smp, Constraint: newCount(100, inSet)},
		})
		require.NoError(t, res[1].Err)
		require.NoError(t, res[2].Err)
		require.NoError(t, res[3].Err)
		assert.Equal(t, alone.Tokens, res[1].Tokens)
		assert.Equal(t, alone.Logits, res[1].Logits)
		for _, tok := range res[2].Tokens {
			require.True(t, inSet(tok))
		}
	}
}

// TestConstrainedSamplesEachCloneTheirState: with n > 1 each sample gets
// its own copy of the constraint at the fork point, so sample i equals a
// single constrained request with seed Seed+i and a fresh constraint, and
// the request's own constraint sees only sample 0's tokens.
func TestConstrainedSamplesEachCloneTheirState(t *testing.T) {
	m := loadTestModel(t, model.ArchQwen3)
	prompt := []int32{1, 4, 7, 10, 13, 16, 19, 22, 25, 28}
	s := Sampling{Temperature: 1.5, Seed: 100}
	c := newCount(6, inSet)
	e := newTestEngine(t, m, testConfig())
	res := e.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 6, N: 4, Sampling: s, Constraint: c}})[1]
	require.NoError(t, res.Err)
	for i, got := range res.Samples {
		alone := s
		alone.Seed += uint64(i)
		want := solo(t, m, testConfig(), []Request{{ID: 1, Prompt: prompt, MaxTokens: 6, Sampling: alone, Constraint: newCount(6, inSet)}})[1]
		assert.Equal(t, want.Tokens, got, "sample %d", i)
		for _, tok := range got {
			require.True(t, inSet(tok))
		}
	}
	assert.Equal(t, res.Samples[0], c.seen)
	assert.Equal(t, 6, *c.accepts)
}

// TestConstrainedProbabilities: raw probabilities (TopProbs) are the
// model's softmax before the mask, equal to an unconstrained request's at
// the same position; post-sampling ones are after it: only allowed tokens,
// the softmax of their logits alone (computed here from the raw logits).
func TestConstrainedProbabilities(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	only := func(t int32) bool { return t >= 40 && t < 45 }
	e := newTestEngine(t, m, testConfig())
	r := Request{ID: 1, Prompt: []int32{9, 9, 9}, MaxTokens: 1, TopProbs: 8, KeepLogits: true, Sampling: Sampling{Temperature: 1, Seed: 1}}
	free := outputs(t, e, r)[0]
	r.Constraint = newCount(1, only)
	raw := outputs(t, e, r)[0]
	assert.True(t, only(raw.Token))
	assert.Equal(t, free.Top, raw.Top, "raw probabilities ignore the mask")
	assert.Equal(t, free.Logits, raw.Logits, "the reported logits are the model's")

	r.Constraint, r.PostSamplingProbs = newCount(1, only), true
	post := outputs(t, e, r)[0]
	require.Len(t, post.Top, 5, "only the 5 allowed tokens have probability")
	var sum float64
	for tok := 40; tok < 45; tok++ {
		sum += math.Exp(float64(post.Logits[tok]))
	}
	var total float32
	for _, tp := range post.Top {
		require.True(t, only(tp.ID))
		assert.InDelta(t, math.Exp(float64(post.Logits[tp.ID]))/sum, float64(tp.Prob), 1e-5)
		total += tp.Prob
	}
	assert.InDelta(t, 1, total, 1e-5)
	assert.InDelta(t, math.Exp(float64(post.Logits[post.Token]))/sum, float64(post.Prob), 1e-5)
}

// outputs runs r alone on e and returns its events.
func outputs(t *testing.T, e *Engine, r Request) []Output {
	t.Helper()
	require.NoError(t, e.Submit(r))
	var out []Output
	for e.Busy() {
		for _, o := range e.Step() {
			require.NoError(t, o.Err)
			out = append(out, o)
		}
	}
	return out
}

// TestConstrainedStreaming: through the engine's Server, a constrained
// request streams only allowed tokens, one event each, in order.
func TestConstrainedStreaming(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	srv := NewServer(newTestEngine(t, m, testConfig()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for seed := range 5 {
		ch, err := srv.Submit(Request{ID: seed, Prompt: []int32{1, 2, 3}, MaxTokens: 7, N: 2, Sampling: Sampling{Temperature: 1, Seed: uint64(seed)}, Constraint: newCount(100, inSet)})
		require.NoError(t, err)
		n := map[int]int{}
		for {
			o, ok, err := ch.Recv(context.Background())
			require.NoError(t, err)
			if !ok {
				break
			}
			require.NoError(t, o.Err)
			assert.Equal(t, n[o.Sample], o.Index)
			n[o.Sample]++
			require.True(t, inSet(o.Token), "token %d", o.Token)
		}
		assert.Equal(t, map[int]int{0: 7, 1: 7}, n)
	}
}

// TestConstrainedRequestsSurvivePreemption: a sequence preempted mid-output
// keeps its constraint's state (its tokens are not generated again), so
// constrained requests in a pool that runs dry give the tokens they give
// alone.
func TestConstrainedRequestsSurvivePreemption(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	rng := rand.New(rand.NewPCG(7, 8))
	var reqs []Request
	for i := range 8 {
		reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, 10+rng.IntN(10), m.Config.VocabSize), MaxTokens: 12, IgnoreEOS: true, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}})
	}
	fresh := func() []Request {
		out := slices.Clone(reqs)
		for i := range out {
			c := newCount(100, inSet)
			c.alternate = true
			out[i].Constraint = c
		}
		return out
	}
	want := solo(t, m, testConfig(), fresh())
	c := testConfig()
	c.NumBlocks = 14
	e := newTestEngine(t, m, c)
	have := e.RunAll(fresh())
	require.Positive(t, e.Stats().Preemptions, "the pool must have run dry")
	for id, w := range want {
		require.NoError(t, have[id].Err)
		assert.Equal(t, w.Tokens, have[id].Tokens, "request %d", id)
		for i, tok := range have[id].Tokens {
			require.True(t, inSet(tok) && (tok < 300) == (i%2 == 0), "request %d token %d: %d", id, i, tok)
		}
	}
}

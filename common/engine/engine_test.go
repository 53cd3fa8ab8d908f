package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/model"
)

// requireSameResults compares token streams and logits bit for bit.
func requireSameResults(t *testing.T, have, want map[int]*Result) {
	t.Helper()
	require.Len(t, have, len(want))
	for id, w := range want {
		h := have[id]
		require.NotNil(t, h, "request %d missing", id)
		require.NoError(t, h.Err, "request %d", id)
		if diff := cmp.Diff(w.Tokens, h.Tokens); diff != "" {
			t.Fatalf("request %d tokens differ (-want +have):\n%s", id, diff)
		}
		require.Len(t, h.Logits, len(w.Logits), "request %d", id)
		for i := range w.Logits {
			for j := range w.Logits[i] {
				if h.Logits[i][j] != w.Logits[i][j] {
					t.Fatalf("request %d token %d logit %d: have %v; want %v (bit-exact)", id, i, j, h.Logits[i][j], w.Logits[i][j])
				}
			}
		}
	}
}

func TestChunkedPrefillMatchesWholePrompt(t *testing.T) {
	for _, arch := range []string{model.ArchLlama, model.ArchQwen3} {
		m := loadTestModel(t, arch)
		rng := rand.New(rand.NewPCG(1, 2))
		var reqs []Request
		for i, n := range []int{1, 5, 37, 70} {
			reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, n, m.Config.VocabSize), MaxTokens: 6, IgnoreEOS: true, KeepLogits: true})
		}
		whole := testConfig()
		whole.ChunkedPrefill = false
		whole.MaxBatchTokens = 512
		whole.MaxContext = 512
		want := solo(t, m, whole, reqs)

		for _, chunk := range []int{1, 3, 16, 64} {
			t.Run(fmt.Sprintf("%s/chunk=%d", arch, chunk), func(t *testing.T) {
				c := testConfig()
				c.MaxBatchTokens = chunk
				c.MaxRunning = 1 // chunk budget 1 cannot fit more than one decode
				requireSameResults(t, solo(t, m, c, reqs), want)
			})
		}
	}
}

func TestContinuousBatchingMatchesOneAtATime(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	rng := rand.New(rand.NewPCG(3, 4))
	var reqs []Request
	for i := range 12 {
		reqs = append(reqs, Request{
			ID: i, Prompt: randomPrompt(rng, 1+rng.IntN(60), m.Config.VocabSize),
			MaxTokens: 1 + rng.IntN(12), IgnoreEOS: true, KeepLogits: true,
		})
	}
	want := solo(t, m, testConfig(), reqs)

	for _, budget := range []int{8, 32, 128} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			c := testConfig()
			c.MaxBatchTokens = budget
			c.MaxRunning = min(budget, 8)
			e := newTestEngine(t, m, c)
			have := e.RunAll(reqs)
			requireSameResults(t, have, want)
			assert.Greater(t, e.Stats().MaxRunning, 1, "the test must actually batch requests")
			assert.Equal(t, 0, e.Pool().UsedBlocks(), "every block returned")
		})
	}
}

func TestStaggeredArrivalsMatchOneAtATime(t *testing.T) {
	// Requests arrive while others decode: new prefill chunks join running
	// decodes in the same forward.
	m := loadTestModel(t, model.ArchQwen3)
	rng := rand.New(rand.NewPCG(5, 6))
	var reqs []Request
	for i := range 6 {
		reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, 20+rng.IntN(40), m.Config.VocabSize), MaxTokens: 10, IgnoreEOS: true, KeepLogits: true})
	}
	want := solo(t, m, testConfig(), reqs)

	c := testConfig()
	c.MaxBatchTokens = 16
	e := newTestEngine(t, m, c)
	have := map[int]*Result{}
	for i, r := range reqs {
		require.NoError(t, e.Submit(r))
		have[r.ID] = &Result{}
		for range i + 2 {
			e.collect(have, e.Step())
		}
	}
	for e.Busy() {
		e.collect(have, e.Step())
	}
	requireSameResults(t, have, want)
}

func TestPoolExhaustionQueuesAndPreempts(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	rng := rand.New(rand.NewPCG(7, 8))
	var reqs []Request
	for i := range 8 {
		reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, 10+rng.IntN(10), m.Config.VocabSize), MaxTokens: 12, IgnoreEOS: true, KeepLogits: true})
	}
	want := solo(t, m, testConfig(), reqs)

	c := testConfig()
	c.NumBlocks = 14 // 56 slots: two or three requests at a time, and decodes outgrow it
	e := newTestEngine(t, m, c)
	have := e.RunAll(reqs)
	requireSameResults(t, have, want)
	s := e.Stats()
	assert.Greater(t, s.Preemptions, 0, "the pool must have run dry during decodes")
	assert.Equal(t, 8, s.Finished)
	assert.Equal(t, 0, e.Pool().UsedBlocks())
}

// TestContextIsWhatThePoolHolds: the engine's context limit is at most the
// pool's capacity, so a prompt over it is refused up front, and an output
// that would outgrow the pool ends with "length" at the limit, never with
// a failure after its tokens were produced.
func TestContextIsWhatThePoolHolds(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.NumBlocks = 4 // 4 blocks of 4: 16 slots
	e := newTestEngine(t, m, c)
	assert.Equal(t, 16, e.ContextLimit())
	err := e.Submit(Request{ID: 1, Prompt: make([]int32, 20), MaxTokens: 1})
	require.ErrorContains(t, err, "the KV pool's 4 blocks of 4 tokens")

	res := e.RunAll([]Request{{ID: 2, Prompt: make([]int32, 10), MaxTokens: 20, IgnoreEOS: true}})
	require.NoError(t, res[2].Err)
	assert.Equal(t, "length", res[2].Reason)
	assert.Len(t, res[2].Tokens, 6, "prompt and output fill the 16 slots")
	assert.Equal(t, 0, e.Pool().UsedBlocks())
}

func TestBadRequestsAreRejectedWithoutHarm(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.MaxContext = 64
	good := Request{ID: 100, Prompt: []int32{5, 6, 7}, MaxTokens: 4, IgnoreEOS: true, KeepLogits: true}
	want := solo(t, m, c, []Request{good})

	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"empty prompt", Request{ID: 1, MaxTokens: 1}, "empty prompt"},
		{"longer than context", Request{ID: 1, Prompt: make([]int32, 64), MaxTokens: 1}, "context of 64"},
		{"token id ≥ vocab", Request{ID: 1, Prompt: []int32{1, 512}, MaxTokens: 1}, "512"},
		{"negative token id", Request{ID: 1, Prompt: []int32{-3}, MaxTokens: 1}, "-3"},
		{"max tokens zero", Request{ID: 1, Prompt: []int32{1}, MaxTokens: 0}, "max tokens"},
		{"max tokens negative", Request{ID: 1, Prompt: []int32{1}, MaxTokens: -2}, "max tokens"},
		{"negative temperature", Request{ID: 1, Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{Temperature: -1}}, "temperature"},
		{"top-p above one", Request{ID: 1, Prompt: []int32{1}, MaxTokens: 1, Sampling: Sampling{Temperature: 1, TopP: 1.5}}, "top-p"},
		{"duplicate id", Request{ID: 100, Prompt: []int32{1}, MaxTokens: 1}, "already in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, m, c)
			require.NoError(t, e.Submit(good))
			err := e.Submit(tc.r)
			require.ErrorContains(t, err, tc.want)
			have := map[int]*Result{good.ID: {}}
			for e.Busy() {
				e.collect(have, e.Step())
			}
			requireSameResults(t, have, want)
		})
	}
}

func TestGenerationStopsAtContextLimit(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.MaxContext = 10
	e := newTestEngine(t, m, c)
	res := e.RunAll([]Request{{ID: 1, Prompt: []int32{1, 2, 3, 4, 5, 6}, MaxTokens: 100, IgnoreEOS: true}})
	require.NoError(t, res[1].Err)
	assert.Len(t, res[1].Tokens, 4, "prompt 6 + 4 generated fills a context of 10")
	assert.Equal(t, "length", res[1].Reason)
}

func TestEOSStopsUnlessIgnored(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	// Find what the model generates greedily, then declare its third token
	// an end-of-sequence token.
	e := newTestEngine(t, m, testConfig())
	free := e.RunAll([]Request{{ID: 1, Prompt: []int32{9, 8, 7}, MaxTokens: 5, IgnoreEOS: true}})[1]
	m.Config.EOSTokenIDs = []int32{free.Tokens[2]}
	defer func() { m.Config.EOSTokenIDs = nil }()

	e = newTestEngine(t, m, testConfig())
	stopped := e.RunAll([]Request{{ID: 1, Prompt: []int32{9, 8, 7}, MaxTokens: 5}})[1]
	first := slices.Index(free.Tokens, free.Tokens[2])
	assert.Equal(t, free.Tokens[:first+1], stopped.Tokens, "generation ends at the first end-of-sequence token, inclusive")
	assert.Equal(t, "eos", stopped.Reason)
}

func TestSeededSamplingIsReproducibleInAnyBatch(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	s := Sampling{Temperature: 0.8, TopP: 0.9, Seed: 42}
	r := Request{ID: 1, Prompt: []int32{3, 1, 4, 1, 5}, MaxTokens: 10, IgnoreEOS: true, Sampling: s}
	alone := solo(t, m, testConfig(), []Request{r})[1]

	e := newTestEngine(t, m, testConfig())
	others := []Request{r}
	for i := 2; i < 6; i++ {
		others = append(others, Request{ID: i, Prompt: []int32{int32(i), 2, 3}, MaxTokens: 8, IgnoreEOS: true, Sampling: Sampling{Temperature: 1, Seed: uint64(i)}})
	}
	batched := e.RunAll(others)[1]
	assert.Equal(t, alone.Tokens, batched.Tokens)

	// A different seed gives a different stream (with overwhelming
	// probability for 10 tokens at temperature 0.8).
	r.Sampling.Seed = 43
	other := solo(t, m, testConfig(), []Request{r})[1]
	assert.NotEqual(t, alone.Tokens, other.Tokens)
}

func TestConfigValidation(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"block size", func(c *Config) { c.BlockSize = 0 }, "block size must be positive"},
		{"blocks", func(c *Config) { c.NumBlocks = -1 }, "number of KV blocks"},
		{"budget", func(c *Config) { c.MaxBatchTokens = 0 }, "max batch tokens"},
		{"running", func(c *Config) { c.MaxRunning = 0 }, "max running"},
		{"context beyond model", func(c *Config) { c.MaxContext = 1 << 30 }, "max_position_embeddings"},
		{"whole prompt budget", func(c *Config) { c.ChunkedPrefill = false; c.MaxContext = 128; c.MaxBatchTokens = 64 }, "for whole-prompt prefill"},
		{"admission", func(c *Config) { c.Admission = 9 }, "admission"},
		{"prefix cache without chunked prefill", func(c *Config) {
			c.ChunkedPrefill, c.MaxBatchTokens, c.MaxContext = false, 128, 128
			c.PrefixCache = func(*kvcache.Allocator, int) kvcache.PrefixCache { return nil }
		}, "requires chunked prefill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.modify(&c)
			_, err := New(m, c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

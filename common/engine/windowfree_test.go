package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/phase08_prefix/radix"
)

// windowFreeRequests are prompts and generations several windows long on
// the test Gemma-3 (window modeltest.GemmaWindow): greedy with logits kept,
// and one request of three sampled continuations (forks share the prompt's
// blocks, local ones included, and copy the shared last block on write).
func windowFreeRequests(m *model.Model) []Request {
	rng := rand.New(rand.NewPCG(7, 8))
	var reqs []Request
	for i, n := range []int{1, 5, modeltest.GemmaWindow, modeltest.GemmaWindow + 1, 37, 70} {
		reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, n, m.Config.VocabSize), MaxTokens: 30, IgnoreEOS: true, KeepLogits: true})
	}
	reqs = append(reqs, Request{ID: len(reqs), Prompt: randomPrompt(rng, 19, m.Config.VocabSize), MaxTokens: 25, IgnoreEOS: true,
		N: 3, Sampling: Sampling{Temperature: 0.8, Seed: 11}})
	return reqs
}

// runWindowFree runs reqs on one engine step by step and checks after every
// step that each running sequence holds exactly the local blocks a query at
// its next position can read (no fewer: the outputs would differ; no more:
// nothing would be saved). It returns the results and the most global
// blocks held beyond local ones at once (the saving, in blocks of one
// layer).
func runWindowFree(t *testing.T, m *model.Model, c Config, reqs []Request) (map[int]*Result, int) {
	t.Helper()
	e := newTestEngine(t, m, c)
	res := map[int]*Result{}
	for _, r := range reqs {
		require.NoError(t, e.Submit(r))
		res[r.ID] = &Result{Samples: make([][]int32, r.samples())}
	}
	p, saved := e.Pool(), 0
	for e.Busy() {
		e.collect(res, e.Step())
		for _, s := range e.running {
			global, local := p.SeqBlocks(s.key)
			first := min(kernels.Visible(s.computed, modeltest.GemmaWindow)/c.BlockSize, global)
			require.Equal(t, global-first, local, "request %d sample %d at position %d: local blocks held", s.req.ID, s.sample, s.computed)
		}
		saved = max(saved, p.UsedBlocks()-p.UsedLocalBlocks())
	}
	for id, r := range res {
		require.NoError(t, r.Err, "request %d", id)
	}
	return res, saved
}

// TestWindowFreeMatchesKeepingEveryBlock is the correctness of
// Config.WindowFree: with local layers giving back every block that fell
// out of the window, the outputs (tokens and logits, bit for bit) equal
// those of the engine that keeps every block, for chunks smaller than,
// equal to and larger than the window, whole-prompt prefill, batches of
// several sequences, a pool small enough to preempt, and a local storage
// smaller than the global one. A kernel that read a given-back block (a -1
// entry) would panic; one that read a reused block would differ.
func TestWindowFreeMatchesKeepingEveryBlock(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	reqs := windowFreeRequests(m)
	keep := testConfig()
	want := newTestEngine(t, m, keep).RunAll(reqs)

	free := func(edit func(*Config)) Config {
		c := testConfig()
		c.WindowFree = true
		edit(&c)
		return c
	}
	cases := map[string]Config{
		"whole prompt": free(func(c *Config) { c.ChunkedPrefill, c.MaxBatchTokens, c.MaxContext = false, 512, 512 }),
		"preempting":   free(func(c *Config) { c.NumBlocks = 36 }),
		"local storage of 40 blocks": free(func(c *Config) {
			c.LocalBlocks = 40
		}),
	}
	for _, chunk := range []int{1, 3, modeltest.GemmaWindow, 16, 64} {
		cases[fmt.Sprintf("one at a time/chunk=%d", chunk)] = free(func(c *Config) { c.MaxBatchTokens, c.MaxRunning = chunk, 1 })
	}
	for _, budget := range []int{8, 32, 128} {
		cases[fmt.Sprintf("batched/budget=%d", budget)] = free(func(c *Config) { c.MaxBatchTokens, c.MaxRunning = budget, min(budget, 8) })
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			have, saved := runWindowFree(t, m, c, reqs)
			requireSameResults(t, have, want)
			for id, w := range want {
				require.Equal(t, w.Samples, have[id].Samples, "request %d samples", id)
			}
			require.Positive(t, saved, "no local block was ever given back")
			if name == "preempting" {
				e := newTestEngine(t, m, c)
				e.RunAll(reqs)
				require.Positive(t, e.Stats().Preemptions, "the case must preempt")
			}
		})
	}
}

// TestWindowFreeRefusesRequestsOverLocalStorage: admission gives the local
// layers a block for every token a sequence has, and a preempted sequence
// is readmitted with its output, so a request whose prompt and output
// could outgrow the local storage could wait forever; Submit refuses it.
// One that fits is served, preempted and readmitted alike.
func TestWindowFreeRefusesRequestsOverLocalStorage(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	c := testConfig()
	c.WindowFree, c.LocalBlocks, c.NumBlocks = true, 12, 20 // 48 and 80 tokens in blocks of 4
	e := newTestEngine(t, m, c)
	rng := rand.New(rand.NewPCG(1, 2))
	require.ErrorContains(t, e.Submit(Request{ID: 1, Prompt: randomPrompt(rng, 16, m.Config.VocabSize), MaxTokens: 33}), "local-layer KV blocks")
	var reqs []Request
	for id := range 3 {
		reqs = append(reqs, Request{ID: 2 + id, Prompt: randomPrompt(rng, 16, m.Config.VocabSize), MaxTokens: 32, IgnoreEOS: true})
	}
	for id, r := range e.RunAll(reqs) {
		require.NoError(t, r.Err, "request %d", id)
		require.Len(t, r.Tokens, 32)
	}
	require.Positive(t, e.Stats().Preemptions, "three sequences of 48 tokens in 80 tokens of global blocks must preempt")
}

// TestWindowFreeCacheReadsGoneKV shows why a prefix cache cannot simply reuse
// the blocks of a sequence whose local layers gave back their
// out-of-window blocks. Request a runs a 40-token prefix and finishes;
// request b shares the prefix. With WindowFree and a radix tree that caches
// a's blocks as if every layer still held them (Validate bypassed), b is
// lent a's global blocks, but its local layers find in the same positions
// whatever their fresh blocks last held: a's KV of other positions. b's
// output differs from the uncached run. The production rule is to refuse
// the combination (Config.Validate): with a prefix cache every layer keeps
// every block, and b, served from the cache, equals the uncached run.
func TestWindowFreeCacheReadsGoneKV(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	rng := rand.New(rand.NewPCG(9, 10))
	prefix := randomPrompt(rng, 40, m.Config.VocabSize)
	var reqs []Request
	for i := range 2 {
		prompt := append(append([]int32(nil), prefix...), randomPrompt(rng, 6, m.Config.VocabSize)...)
		reqs = append(reqs, Request{ID: i, Prompt: prompt, MaxTokens: 20, IgnoreEOS: true, KeepLogits: true})
	}
	uncached := testConfig()
	want := newTestEngine(t, m, uncached).RunAll(reqs)

	// serve runs a, then b, on one engine, and returns b's result and how
	// many of its prompt tokens came from the cache.
	serve := func(e *Engine) (*Result, int) {
		e.RunAll(reqs[:1])
		res := e.RunAll(reqs[1:])
		return res[1], e.Stats().CachedTokens
	}

	naive := testConfig()
	naive.PrefixCache, naive.WindowFree = radix.New, true
	e, err := build(m, naive)
	require.NoError(t, err)
	defer e.Close()
	got, cached := serve(e)
	require.Greater(t, cached, 2*modeltest.GemmaWindow, "b must reuse a prefix longer than the window")
	require.NoError(t, got.Err)
	diff := cmp.Diff(want[1].Logits, got.Logits)
	require.NotEmpty(t, diff, "b read a's given-back local KV and still matched the uncached run")
	t.Logf("symptom: cache + window-free: b reused %d cached tokens; its tokens %v, uncached %v", cached, got.Tokens[:8], want[1].Tokens[:8])

	_, err = New(m, naive)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce, "the engine must refuse a prefix cache with WindowFree")
	require.Equal(t, "WindowFree", ce.Field)
	t.Logf("fix: %v", err)

	keep := naive
	keep.WindowFree = false
	got, cached = serve(newTestEngine(t, m, keep))
	require.Greater(t, cached, 2*modeltest.GemmaWindow)
	requireSameResults(t, map[int]*Result{1: got}, map[int]*Result{1: want[1]})
}

package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/phase08_prefix/radix"
)

// loadModel returns the small synthetic model every engine test runs.
func loadModel(t testing.TB) *model.Model { return modeltest.Load(t, model.ArchLlama, 8) }

// config is the engine setup the tests start from: the radix tree, small
// blocks where the edge cases live, and the ownership audit after every
// step.
func config() engine.Config {
	c := engine.DefaultConfig()
	c.BlockSize = 4
	c.NumBlocks = 128
	c.MaxBatchTokens = 32
	c.MaxRunning = 8
	c.Audit = true
	c.PrefixCache = radix.New
	return c
}

// baseline is c without the prefix cache: the engine every cached run must
// reproduce bit for bit.
func baseline(c engine.Config) engine.Config {
	c.PrefixCache = nil
	c.NumBlocks = 1024
	return c
}

// withCache returns c using the cache wrap builds around a fresh tree.
func withCache(c engine.Config, wrap func(*radix.Tree) kvcache.PrefixCache) engine.Config {
	c.PrefixCache = func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return wrap(radix.NewTree(a, bs)) }
	return c
}

func newEngine(t testing.TB, m *model.Model, c engine.Config) *engine.Engine {
	t.Helper()
	e, err := engine.New(m, c)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

// result is what one request produced.
type result struct {
	tokens []int32
	logits [][]float32
	cached int // prompt tokens found in the cache at first admission
	err    error
	done   bool
}

// serve submits reqs and steps e until they are all done, or for at most
// maxSteps steps; it returns what each request produced so far.
func serve(t testing.TB, e *engine.Engine, maxSteps int, reqs ...engine.Request) map[int]*result {
	t.Helper()
	res := map[int]*result{}
	for _, r := range reqs {
		require.NoError(t, e.Submit(r))
		res[r.ID] = &result{}
	}
	for step := 0; e.Busy() && step < maxSteps; step++ {
		for _, o := range e.Step() {
			r := res[o.ID]
			r.done = r.done || o.Done
			if o.Err != nil {
				r.err = o.Err
				continue
			}
			r.cached = o.Cached
			r.tokens = append(r.tokens, o.Token)
			if o.Logits != nil {
				r.logits = append(r.logits, o.Logits)
			}
		}
	}
	return res
}

// run serves reqs on a fresh engine and fails the test on any error.
func run(t testing.TB, m *model.Model, c engine.Config, reqs ...engine.Request) map[int]*result {
	t.Helper()
	res := serve(t, newEngine(t, m, c), 100_000, reqs...)
	for id, r := range res {
		require.NoError(t, r.err, "request %d", id)
		require.True(t, r.done, "request %d", id)
	}
	return res
}

// requireSame fails unless have and want hold the same tokens and the same
// logits, bit for bit.
func requireSame(t testing.TB, have, want map[int]*result) {
	t.Helper()
	require.Len(t, have, len(want))
	for id, w := range want {
		h := have[id]
		require.NotNil(t, h, "request %d missing", id)
		if diff := cmp.Diff(w.tokens, h.tokens); diff != "" {
			t.Fatalf("request %d tokens differ (-want +have):\n%s", id, diff)
		}
		require.Len(t, h.logits, len(w.logits), "request %d", id)
		for i := range w.logits {
			require.Len(t, h.logits[i], len(w.logits[i]), "request %d token %d", id, i)
			for j, wv := range w.logits[i] {
				if hv := h.logits[i][j]; math.Float32bits(hv) != math.Float32bits(wv) {
					t.Fatalf("request %d token %d logit %d: have %v; want %v (bit for bit)", id, i, j, hv, wv)
				}
			}
		}
	}
}

// request returns a greedy request that keeps its logits.
func request(id int, prompt []int32, maxTokens int) engine.Request {
	return engine.Request{ID: id, Prompt: prompt, MaxTokens: maxTokens, IgnoreEOS: true, KeepLogits: true}
}

// tokens returns n token ids from rng.
func tokens(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(512))
	}
	return out
}

func join(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

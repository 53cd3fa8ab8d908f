package main

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// loadModel returns the small synthetic model every test here runs.
func loadModel(t testing.TB) *model.Model { return modeltest.Load(t, model.ArchLlama, 7) }

// testConfig is small enough for many engine runs per test, and audits
// block ownership after every step: a violation panics the test.
func testConfig() engine.Config {
	c := engine.DefaultConfig()
	c.BlockSize = 4
	c.NumBlocks = 128
	c.MaxBatchTokens = 32
	c.MaxRunning = 8
	c.Audit = true
	return c
}

// cached returns c with the prefix cache f builds.
func cached(c engine.Config, f func(*kvcache.Allocator, int) kvcache.PrefixCache) engine.Config {
	c.PrefixCache = f
	return c
}

// serve runs reqs on a fresh engine, submitting request i after i*gap
// steps so that later requests can find earlier ones in the cache (gap 0
// submits them all at once). It returns the results and the engine.
func serve(t testing.TB, m *model.Model, c engine.Config, reqs []engine.Request, gap int) (map[int]*engine.Result, *engine.Engine) {
	t.Helper()
	e, err := engine.New(m, c)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	res := map[int]*engine.Result{}
	collect := func(outs []engine.Output) {
		for _, o := range outs {
			r := res[o.ID]
			for len(r.Samples) <= o.Sample {
				r.Samples = append(r.Samples, nil)
			}
			switch {
			case o.Err != nil:
				r.Err = o.Err
			case o.Sample == 0:
				r.Tokens = append(r.Tokens, o.Token)
				if o.Logits != nil {
					r.Logits = append(r.Logits, o.Logits)
				}
				fallthrough
			default:
				r.Samples[o.Sample] = append(r.Samples[o.Sample], o.Token)
			}
		}
	}
	for _, r := range reqs {
		require.NoError(t, e.Submit(r))
		res[r.ID] = &engine.Result{}
		for range gap {
			collect(e.Step())
		}
	}
	for e.Busy() {
		collect(e.Step())
	}
	for id, r := range res {
		require.NoError(t, r.Err, "request %d", id)
	}
	require.Zero(t, e.Pool().Live(), "sequences left open")
	return res, e
}

// baseline runs reqs on the phase-7 engine (no prefix cache): the reference
// every cached run must reproduce bit for bit.
func baseline(t testing.TB, m *model.Model, c engine.Config, reqs []engine.Request) map[int]*engine.Result {
	t.Helper()
	c.PrefixCache = nil
	res, _ := serve(t, m, c, reqs, 0)
	return res
}

// diff describes how have differs from want — tokens of every sample,
// then sample 0's logits bit for bit — or returns "".
func diff(have, want map[int]*engine.Result) string {
	for id, w := range want {
		h := have[id]
		if h == nil {
			return fmt.Sprintf("request %d missing", id)
		}
		if d := cmp.Diff(w.Samples, h.Samples); d != "" {
			return fmt.Sprintf("request %d tokens (-want +have):\n%s", id, d)
		}
		if len(h.Logits) != len(w.Logits) {
			return fmt.Sprintf("request %d: have logits for %d tokens; want %d", id, len(h.Logits), len(w.Logits))
		}
		for i := range w.Logits {
			for j := range w.Logits[i] {
				if h.Logits[i][j] != w.Logits[i][j] {
					return fmt.Sprintf("request %d token %d logit %d: have %v; want %v", id, i, j, h.Logits[i][j], w.Logits[i][j])
				}
			}
		}
	}
	return ""
}

// requireSame fails unless have equals want bit for bit.
func requireSame(t testing.TB, have, want map[int]*engine.Result) {
	t.Helper()
	if d := diff(have, want); d != "" {
		t.Fatal(d)
	}
}

// tokens returns n token ids base, base+1, ... (mod the test vocabulary).
func tokens(base, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32((base + i) % 512)
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

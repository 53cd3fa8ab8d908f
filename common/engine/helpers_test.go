package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// loadTestModel returns the small test model of arch (Llama: GQA and
// llama3 RoPE scaling; Qwen3: per-head q/k norms).
func loadTestModel(t testing.TB, arch string) *model.Model { return modeltest.Load(t, arch, 7) }

// testConfig is the engine configuration tests start from: audit on, so
// every step of every engine test checks block ownership.
func testConfig() Config {
	c := DefaultConfig()
	c.BlockSize = 4
	c.NumBlocks = 256
	c.MaxBatchTokens = 64
	c.MaxRunning = 16
	c.Audit = true
	return c
}

func newTestEngine(t testing.TB, m *model.Model, c Config) *Engine {
	t.Helper()
	e, err := New(m, c)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

// randomPrompt returns n token ids from a fixed-seed stream.
func randomPrompt(rng *rand.Rand, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(vocab))
	}
	return p
}

// solo runs each request alone on a fresh engine: the reference that
// batching, chunking and preemption must reproduce bit for bit.
func solo(t *testing.T, m *model.Model, c Config, reqs []Request) map[int]*Result {
	t.Helper()
	out := map[int]*Result{}
	for _, r := range reqs {
		e := newTestEngine(t, m, c)
		res := e.RunAll([]Request{r})
		require.NoError(t, res[r.ID].Err)
		out[r.ID] = res[r.ID]
	}
	return out
}

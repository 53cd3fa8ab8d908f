package engine

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/kernels/cpu"
)

// testModelOptions is a model small enough for many engine runs per test
// but with every feature the forward has: GQA, llama3 RoPE scaling.
func testModelOptions(arch string) model.SynthOptions {
	o := model.DefaultSynth(arch)
	o.Vocab, o.Hidden, o.Intermediate, o.Layers = 512, 64, 128, 2
	o.Heads, o.KVHeads, o.HeadDim = 4, 2, 16
	o.Seed = 7
	return o
}

var (
	modelDirs   = map[string]string{}
	modelDirsMu sync.Mutex
	testRoot    string
)

func TestMain(m *testing.M) {
	var err error
	testRoot, err = os.MkdirTemp("", "engine-test-")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(testRoot)
	os.Exit(code)
}

// loadTestModel writes (once per package run) and loads the test model.
func loadTestModel(t testing.TB, arch string) *model.Model {
	t.Helper()
	modelDirsMu.Lock()
	dir, ok := modelDirs[arch]
	if !ok {
		dir = filepath.Join(testRoot, arch)
		require.NoError(t, model.WriteSynthetic(dir, testModelOptions(arch)))
		modelDirs[arch] = dir
	}
	modelDirsMu.Unlock()
	m, err := model.Load(dir, cpu.New())
	require.NoError(t, err)
	return m
}

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

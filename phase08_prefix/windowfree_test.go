package main

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/phase08_prefix/radix"
)

// windowPort is a small port of the engine's steps onto a kvcache.Pool, so
// that a pool the engine refuses to build (a prefix cache next to local
// layers that give back out-of-window blocks) can still be run.
type windowPort struct {
	m *model.Model
	p *kvcache.Pool
}

func newWindowPort(t *testing.T, m *model.Model, windowFree bool) *windowPort {
	t.Helper()
	c := kvcache.Config{Layers: m.Config.NumHiddenLayers, KVDim: m.Config.KVDim(), Blocks: 64, BlockSize: 4, NewCache: radix.New}
	if windowFree {
		c.LocalBlocks = 64
		for l := range c.Layers {
			c.Windows = append(c.Windows, m.Config.LayerWindow(l))
		}
	}
	p, err := kvcache.NewPool(m.Backend(), c)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &windowPort{m, p}
}

// forward computes positions [from, to) of sequence id, whose tokens are
// toks, and returns the last one's logits; local layers then give back
// what fell out of the window, as the engine's runner does.
func (w *windowPort) forward(id int, toks []int32, from, to int) []float32 {
	st := &model.Step{Tokens: toks[from:to], LogitRows: []int32{int32(to - from - 1)}}
	for pos := from; pos < to; pos++ {
		st.Pos = append(st.Pos, int32(pos))
	}
	st.Slots = w.p.Slots(nil, id, from, to-from)
	st.Seqs = []kernels.AttnSeq{{QLen: to - from, CtxLen: to, Pages: w.p.Pages(id)}}
	if w.p.WindowFree() {
		st.LocalSlots = w.p.LocalSlots(nil, id, from, to-from)
		st.LocalSeqs = []kernels.AttnSeq{{QLen: to - from, CtxLen: to, Pages: w.p.LocalPages(id)}}
	}
	logits := w.m.Forward(st, w.p)
	out := w.m.Backend().ToHost(logits, make([]float32, logits.Cols()))
	w.p.Slide(id, to)
	return out
}

// serve runs prompt through sequence id in chunks of 8, generates gen
// greedy tokens, commits what it computed and releases the sequence. It
// returns the first output token's logits and how many prompt tokens the
// cache lent.
func (w *windowPort) serve(t *testing.T, id int, prompt []int32, gen int) ([]float32, int) {
	t.Helper()
	cached, err := w.p.Open(id, "", prompt)
	require.NoError(t, err)
	toks := slices.Clone(prompt)
	require.NoError(t, w.p.Grow(id, len(toks)))
	from := min(cached, len(toks)-1)
	var first, logits []float32
	for from < len(toks) {
		to := min(from+8, len(toks))
		logits = w.forward(id, toks, from, to)
		from = to
	}
	first = logits
	for range gen {
		toks = append(toks, int32(slices.Index(logits, slices.Max(logits))))
		require.NoError(t, w.p.Grow(id, len(toks)))
		logits = w.forward(id, toks, len(toks)-1, len(toks))
	}
	w.p.Commit(id, toks[:len(toks)-1])
	w.p.Release(id)
	require.NoError(t, w.p.Audit().Err())
	return first, cached
}

// TestPitfallWindowFreePrefixCache: request a (a 40-token prefix, then its
// own tokens) finishes; request b shares the prefix. On a pool whose local
// layers give back their out-of-window blocks, the radix tree caches a's
// blocks as if every layer still held them: b is lent a's global blocks,
// but its local layers find, at the prefix's positions, blocks a gave back
// long ago and reused for later positions. b's first logits then differ
// from the uncached run's. With every block kept they are equal, and the
// engine refuses the combination (engine.Config.Validate: WindowFree with
// a prefix cache).
func TestPitfallWindowFreePrefixCache(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	rng := rand.New(rand.NewPCG(9, 10))
	prefix := tokens(rng, 40)
	a, b := join(prefix, tokens(rng, 6)), join(prefix, tokens(rng, 5))

	// The uncached run of b: a whole-prompt forward that caches nothing.
	st := &model.Step{Tokens: b, Local: true, LogitRows: []int32{int32(len(b) - 1)}, Seqs: []kernels.AttnSeq{{QLen: len(b), CtxLen: len(b)}}}
	for pos := range b {
		st.Pos = append(st.Pos, int32(pos))
	}
	logits := m.Forward(st, nil)
	want := m.Backend().ToHost(logits, make([]float32, logits.Cols()))

	bad := newWindowPort(t, m, true)
	bad.serve(t, 1, a, 20)
	have, cached := bad.serve(t, 2, b, 0)
	require.Equal(t, 40, cached, "b must reuse the whole prefix, five windows long")
	require.NotEqual(t, want, have, "b read local-layer KV that a gave back, yet matched the uncached run")
	diff := 0
	for i := range want {
		if have[i] != want[i] {
			diff++
		}
	}

	good := newWindowPort(t, m, false)
	good.serve(t, 1, a, 20)
	fixed, cached := good.serve(t, 2, b, 0)
	require.Equal(t, 40, cached)
	require.Equal(t, want, fixed, "with every block kept, the cached prefix is exact")

	c := engine.DefaultConfig()
	c.PrefixCache, c.WindowFree = radix.New, true
	_, err := engine.New(m, c)
	var ce *engine.ConfigError
	require.ErrorAs(t, err, &ce, "the engine must refuse a prefix cache next to WindowFree")
	require.Equal(t, "WindowFree", ce.Field)
	t.Logf("with the bug (a prefix cache on a pool whose local layers freed their out-of-window blocks): b reuses %d tokens and %d of its %d first logits differ from the uncached run; fixed (every block kept): all equal, and the engine refuses the combination: %v",
		cached, diff, len(want), err)
}

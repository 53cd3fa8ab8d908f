// Package modeltest gives tests a small synthetic model to run the engine
// on: small enough for hundreds of engine runs per package, with every
// feature the forward has (grouped-query attention, Llama-3 RoPE scaling or
// Qwen3's per-head norms).
package modeltest

import (
	"path/filepath"
	"testing"

	"kvlab/common/model"
	"kvlab/kernels/cpu"
)

// Options returns the small model's options: hidden 64, 2 layers, 4 query
// heads sharing 2 KV heads of 16 features, vocabulary 512.
func Options(arch string, seed int64) model.SynthOptions {
	o := model.DefaultSynth(arch)
	o.Vocab, o.Hidden, o.Intermediate, o.Layers = 512, 64, 128, 2
	o.Heads, o.KVHeads, o.HeadDim = 4, 2, 16
	o.Seed = seed
	return o
}

// GemmaWindow is the sliding window of Gemma3Options' local layers: shorter
// than most test prompts, so that tests run past it.
const GemmaWindow = 8

// Gemma3Options returns a small Gemma-3 of Options' sizes with three layers:
// two sliding layers of window GemmaWindow and a global one, so a prompt
// longer than the window exercises both kinds.
func Gemma3Options(seed int64) model.SynthOptions {
	o := Options(model.ArchGemma3, seed)
	o.Layers, o.SlidingWindow, o.SlidingWindowPattern = 3, GemmaWindow, 3
	o.QueryPreAttnScalar = float64(o.HeadDim)
	return o
}

// Load writes the small model of arch with seed into a temporary directory
// of tb's and loads it on the CPU backend. The same arguments always give
// the same weights.
func Load(tb testing.TB, arch string, seed int64) *model.Model {
	tb.Helper()
	return LoadOptions(tb, Options(arch, seed))
}

// LoadOptions writes the synthetic model o into a temporary directory of
// tb's and loads it on the CPU backend.
func LoadOptions(tb testing.TB, o model.SynthOptions) *model.Model {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "model")
	if err := model.WriteSynthetic(dir, o); err != nil {
		tb.Fatal(err)
	}
	m, err := model.Load(dir, cpu.New())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Close)
	return m
}

package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenModels, when set, makes TestGoldenLogits write its models and a
// cases.json into that directory for scripts/torch_reference.py instead of
// comparing against the golden files.
var goldenModels = flag.String("golden-models", "", "write the golden models and cases.json here for scripts/torch_reference.py, and skip the comparison")

// regenerateGolden is the command that rebuilds testdata/golden from the
// repository root.
const regenerateGolden = `d=$(mktemp -d) && go test ./common/model -run TestGoldenLogits -args -golden-models "$d" && python3 scripts/torch_reference.py --cases "$d/cases.json" --out-dir common/model/testdata/golden`

// goldenTolerance bounds the max relative error between our logits and the
// PyTorch reference's, defined as max|ours-ref| / max|ref| over a prompt's
// logits: relative to the largest logit so that logits near zero do not
// turn float32 rounding noise into huge ratios.
const goldenTolerance = 1e-4

// goldenCase is one synthetic model checked against the reference.
type goldenCase struct {
	name string
	opts SynthOptions
}

func goldenCases() []goldenCase {
	small := func(arch string, seed int64, dtype string, tied bool) SynthOptions {
		o := DefaultSynth(arch)
		o.Seed = seed
		o.Vocab, o.Hidden, o.Intermediate, o.Layers = 256, 64, 160, 2
		o.Heads, o.KVHeads, o.HeadDim = 4, 2, 16
		o.DType, o.Tied = dtype, tied
		return o
	}
	sharded := small(ArchQwen3, 104, "f16", false)
	sharded.Shards = 2
	// Gemma-3 with windows shorter than the 37-token prompt, so that the
	// sliding layers' window decides the logits: two sliding layers of
	// window 8 and a global one (sliding_window_pattern 3), and a scale
	// (query_pre_attn_scalar 24) that head_dim 16 would get wrong.
	gemma := small(ArchGemma3, 105, "f32", true)
	gemma.Layers, gemma.SlidingWindow, gemma.SlidingWindowPattern = 3, 8, 3
	gemma.QueryPreAttnScalar = 24
	// bf16, untied, explicit layer_types (global first), window 5, linear
	// RoPE scaling on the global layer, and both soft caps small enough to
	// bend the values they cap.
	gemmaCap := small(ArchGemma3, 106, "bf16", false)
	gemmaCap.Layers, gemmaCap.SlidingWindow = 2, 5
	gemmaCap.LayerTypes = []string{LayerFull, LayerSliding}
	gemmaCap.RopeScaling = &RopeScaling{RopeType: "linear", Factor: 8}
	gemmaCap.FinalSoftcap, gemmaCap.AttnSoftcap = 3, 1.5
	return []goldenCase{
		{"gemma3-f32-window8", gemma},
		{"gemma3-bf16-untied-softcap-window5", gemmaCap},
		{"llama-f32", small(ArchLlama, 101, "f32", true)},
		{"qwen3-f32", small(ArchQwen3, 102, "f32", true)},
		{"llama-bf16-untied", small(ArchLlama, 103, "bf16", false)},
		{"qwen3-f16-untied-sharded", sharded},
	}
}

// goldenPrompts are the prompts every case runs: a single token, a short
// prompt, and one long enough to span several RoPE periods of the high
// frequencies.
func goldenPrompts(vocab int) [][]int32 { return testPrompts(vocab, 1, 7, 37) }

// goldenFile is what scripts/torch_reference.py writes.
type goldenFile struct {
	Name              string            `json:"name"`
	Architecture      string            `json:"architecture"`
	TorchVersion      string            `json:"torch_version"`
	SafetensorsSHA256 map[string]string `json:"safetensors_sha256"`
	Prompts           [][]int32         `json:"prompts"`
	Logits            [][]float32       `json:"logits"`
}

// TestGoldenLogits compares our forward on the CPU backend with an
// independent PyTorch implementation (scripts/torch_reference.py), through
// golden files, so CI needs no PyTorch. Each golden file records the SHA-256
// of the weights the reference read; the test regenerates the synthetic
// model and checks the hash first, so a change to the synthetic writer
// reports stale golden files instead of a wrong forward.
func TestGoldenLogits(t *testing.T) {
	if *goldenModels != "" {
		writeGoldenModels(t, *goldenModels)
		t.Skipf("wrote the golden models into %s; now run scripts/torch_reference.py on %s", *goldenModels, filepath.Join(*goldenModels, "cases.json"))
	}
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "golden", gc.name+".json"))
			require.NoError(t, err, "regenerate golden with: %s", regenerateGolden)
			var g goldenFile
			require.NoError(t, json.Unmarshal(raw, &g))

			dir := t.TempDir()
			require.NoError(t, WriteSynthetic(dir, gc.opts))
			have := safetensorsHashes(t, dir)
			if !assert.Equal(t, g.SafetensorsSHA256, have, "the synthetic model's weights changed since the golden file was made; regenerate golden with: %s", regenerateGolden) {
				return
			}
			prompts := goldenPrompts(gc.opts.Vocab)
			require.Equal(t, prompts, g.Prompts, "golden prompts: have %v; want %v; regenerate golden with: %s", g.Prompts, prompts, regenerateGolden)
			require.Len(t, g.Logits, len(prompts))

			m := loadSynth(t, gc.opts)
			runs := map[string][][]float32{
				"local prefill": lastLogitsLocal(m, prompts, nil),
				"paged chunks":  lastLogitsChunked(m, prompts, []int{1, 3, 8}, newPagedKV(m, 32, 4)),
			}
			for _, how := range slices.Sorted(maps.Keys(runs)) {
				worst := 0.0
				for i, want := range g.Logits {
					require.Len(t, runs[how][i], len(want))
					err := maxRelErr(runs[how][i], want)
					worst = max(worst, err)
					assert.LessOrEqual(t, err, goldenTolerance, "%s, prompt of %d tokens: max relative error have %g; want <= %g", how, len(prompts[i]), err, goldenTolerance)
				}
				t.Logf("%s: max relative error vs PyTorch %.3g", how, worst)
			}
		})
	}
}

// safetensorsHashes returns the SHA-256 of every safetensors file in dir.
func safetensorsHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		sum := sha256.Sum256(raw)
		out[e.Name()] = hex.EncodeToString(sum[:])
	}
	return out
}

// writeGoldenModels writes each case's model into dir/<name> and a
// cases.json listing them with their prompts, the input of
// scripts/torch_reference.py --cases.
func writeGoldenModels(t *testing.T, dir string) {
	type caseJSON struct {
		Name    string    `json:"name"`
		Dir     string    `json:"dir"`
		Prompts [][]int32 `json:"prompts"`
	}
	var cases []caseJSON
	for _, gc := range goldenCases() {
		require.NoError(t, WriteSynthetic(filepath.Join(dir, gc.name), gc.opts))
		cases = append(cases, caseJSON{Name: gc.name, Dir: gc.name, Prompts: goldenPrompts(gc.opts.Vocab)})
	}
	raw, err := json.MarshalIndent(map[string]any{"cases": cases}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.json"), raw, 0o644))
}

package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestBF16DotParity is greedy parity with bf16 products (-bf16-dot) on
// bf16 checkpoints of the three architectures, in two parts, as
// TestKVCacheDTypeParity is for the KV dtype.
//
// With bf16 products on, each of the three prefix caches reproduces the
// uncached engine's tokens and logits bit for bit: a row's products do
// not depend on its batch, so the KV a cache hands back is the KV a
// recomputation writes.
//
// Against the same checkpoint with float32 activations (the default),
// the logits stay within bf16DotTolerance per row and the greedy tokens
// agree except at near-ties, on at least bf16DotTokenMatch of the tokens.
// The figures printed are those docs/phase07.md quotes.
func TestBF16DotParity(t *testing.T) {
	var figs kvFigures
	for _, arch := range model.BuiltinArchs {
		t.Run(arch, func(t *testing.T) {
			o := modeltest.Options(arch, 5)
			if arch == model.ArchGemma3 {
				o = modeltest.Gemma3Options(5)
			}
			o.DType = "bf16"
			dir := filepath.Join(t.TempDir(), "model")
			require.NoError(t, model.WriteSynthetic(dir, o))
			load := func(dot bool) *model.Model {
				be := cpu.New()
				be.SetBF16Dot(dot)
				m, err := model.Load(dir, be)
				require.NoError(t, err)
				t.Cleanup(m.Close)
				return m
			}
			plain, dot := load(false), load(true)
			want := kvParityRun(t, plain, kernels.KVF32, nil, 40, 16)
			base := kvParityRun(t, dot, kernels.KVF32, nil, 40, 16)
			for _, v := range Variants {
				res := kvParityRun(t, dot, kernels.KVF32, v.PrefixCache, 40, 16)
				for i := range res {
					requireBitEqual(t, base[i].Result, res[i].Result, fmt.Sprintf("%s: request %d against the uncached run", v.Name, i))
				}
			}
			require.NotEqual(t, want[0].Logits[0], base[0].Logits[0], "bf16 products changed no logit")
			figs.compareWithin(t, "bf16-dot", bf16DotTolerance, want, base)
		})
	}
	figs.reportAs(t, "bf16-dot", bf16DotTokenMatch, "small bf16 models")
}

// bf16DotTolerance bounds ‖l − l32‖ / ‖l32‖ for a row of logits with bf16
// products against float32 activations, with room over what the test
// measures: every activation entering a product is rounded to 8
// significant bits (relative error up to 2⁻⁹), as a bf16 KV pool rounds
// keys and values.
const bf16DotTolerance = 2e-2

// bf16DotTokenMatch is the least share of greedy tokens a run with bf16
// products generates before it first parts from float32 activations'.
const bf16DotTokenMatch = 0.85

package gguf

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
)

// gemmaGGUFNames maps a Gemma-3 checkpoint's HuggingFace tensor names to
// the names llama.cpp's converter gives them (gguf-py's tensor mapping for
// MODEL_ARCH.GEMMA3), written out here rather than taken from gemmaPlan so
// that a wrong source in the plan shows.
func gemmaGGUFNames(layers int, tied bool) map[string]string {
	m := map[string]string{
		"model.embed_tokens.weight": "token_embd.weight",
		"model.norm.weight":         "output_norm.weight",
	}
	if !tied {
		m["lm_head.weight"] = "output.weight"
	}
	parts := map[string]string{
		"input_layernorm":            "attn_norm",
		"self_attn.q_proj":           "attn_q",
		"self_attn.k_proj":           "attn_k",
		"self_attn.v_proj":           "attn_v",
		"self_attn.o_proj":           "attn_output",
		"self_attn.q_norm":           "attn_q_norm",
		"self_attn.k_norm":           "attn_k_norm",
		"post_attention_layernorm":   "post_attention_norm",
		"pre_feedforward_layernorm":  "ffn_norm",
		"post_feedforward_layernorm": "post_ffw_norm",
		"mlp.gate_proj":              "ffn_gate",
		"mlp.up_proj":                "ffn_up",
		"mlp.down_proj":              "ffn_down",
	}
	for l := range layers {
		for hf, g := range parts {
			m[fmt.Sprintf("model.layers.%d.%s.weight", l, hf)] = fmt.Sprintf("blk.%d.%s.weight", l, g)
		}
	}
	return m
}

// TestExportGemma3EveryTensor exports small Gemma-3 checkpoints and reads
// every tensor of the GGUF file back against the checkpoint tensor it must
// come from, by name: the same dims (reversed), and the same values bit for
// bit in the on-disk dtype, except that each norm (every HuggingFace name
// ending in "norm.weight": the four layer norms, q_norm, k_norm and the
// final norm) is F32 holding 1 + weight, as llama.cpp's converter writes
// Gemma's (1 + w) RMSNorm for its plain one. The file holds no other
// tensor. The synthetic weights are random per tensor (checked), so a
// tensor read from the wrong source, or a norm written without the 1,
// fails here.
func TestExportGemma3EveryTensor(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		tied  bool
	}{{"bf16", true}, {"f32", false}, {"f16", true}} {
		t.Run(fmt.Sprintf("%s-tied=%v", tc.dtype, tc.tied), func(t *testing.T) {
			o := model.DefaultSynth(model.ArchGemma3)
			o.Vocab, o.Hidden, o.Intermediate, o.Layers, o.Heads, o.KVHeads, o.HeadDim = 400, 32, 48, 2, 2, 1, 16
			o.QueryPreAttnScalar, o.SlidingWindowPattern = 16, 2 // llama.cpp's scale; one local and one global layer
			o.DType, o.Tied = tc.dtype, tc.tied
			f, s, _ := export(t, o)
			require.Equal(t, ArchGemma3, s.Arch)

			src, err := model.SynthTensors(o)
			require.NoError(t, err)
			// Tensors of one shape must differ, or a swap between them
			// would go unseen.
			for i, a := range src {
				for _, b := range src[:i] {
					if slices.Equal(a.Shape, b.Shape) {
						require.NotEqual(t, a.Data, b.Data, "%s and %s hold the same values", a.Name, b.Name)
					}
				}
			}

			names := gemmaGGUFNames(o.Layers, o.Tied)
			require.Len(t, src, len(names), "the checkpoint's tensors are the mapping's")
			diskType := map[string]TensorType{"f32": F32, "bf16": BF16, "f16": F16}[tc.dtype]
			seen := map[string]bool{}
			for _, ht := range src {
				g, ok := names[ht.Name]
				require.True(t, ok, "checkpoint tensor %s has no GGUF name", ht.Name)
				seen[g] = true
				ti, ok := f.Tensor(g)
				require.True(t, ok, "%s (from %s) is not in the file", g, ht.Name)
				require.Equal(t, ggufDims(ht.Shape), ti.Dims, g)
				norm := strings.HasSuffix(ht.Name, "norm.weight")
				want := ht.Data
				if norm {
					require.Equal(t, F32, ti.Type, "%s is a norm, written as F32", g)
					want = make([]float32, len(ht.Data))
					for i, x := range ht.Data {
						want[i] = 1 + x
					}
				} else {
					require.Equal(t, diskType, ti.Type, "%s keeps the checkpoint's dtype", g)
				}
				have, err := f.ReadFloat32(g)
				require.NoError(t, err, g)
				require.Len(t, have, len(want), g)
				for i := range want {
					if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s[%d] = %v; want %v, from %s[%d] = %v (norm %v)", g, i, have[i], want[i], ht.Name, i, ht.Data[i], norm)
					}
				}
			}
			for _, ti := range f.Tensors {
				require.True(t, seen[ti.Name], "the file holds %s, which no checkpoint tensor maps to", ti.Name)
			}
			require.Len(t, f.Tensors, len(names))
		})
	}
}

package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/tokenizer"
)

// tinySynth is a model small enough for tests that load it many times.
func tinySynth(arch string, seed int64) SynthOptions {
	o := DefaultSynth(arch)
	o.Seed = seed
	o.Vocab, o.Hidden, o.Intermediate, o.Layers = 96, 32, 48, 2
	o.Heads, o.KVHeads, o.HeadDim = 4, 2, 8
	return o
}

func TestDefaultSynth(t *testing.T) {
	for _, arch := range []string{"llama", ArchLlama, "qwen3", ArchQwen3} {
		t.Run(arch, func(t *testing.T) {
			c, err := DefaultSynth(arch).Config()
			require.NoError(t, err)
			assert.Equal(t, 256, c.HiddenSize)
			assert.Equal(t, 4, c.NumHiddenLayers)
			assert.Equal(t, 2, c.NumKeyValueHeads)
			assert.Equal(t, 64, c.HeadDim)
			assert.True(t, c.TieWordEmbeddings)
		})
	}
	assert.Equal(t, ArchLlama, DefaultSynth("llama").Arch)
	assert.NotNil(t, DefaultSynth("llama").RopeScaling)
	assert.Nil(t, DefaultSynth("qwen3").RopeScaling)
	assert.Equal(t, 1e6, DefaultSynth("qwen3").RopeTheta)
}

// TestSynthTensorNames spells out the HuggingFace names literally, so a
// typo common to the writer and the loader cannot go unnoticed.
func TestSynthTensorNames(t *testing.T) {
	layer := func(parts ...string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, "model.layers.0."+p+".weight")
		}
		return out
	}
	llama := append(append([]string{"model.embed_tokens.weight"}, layer(
		"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
		"post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")...), "model.norm.weight")
	qwen3 := append(append([]string{"model.embed_tokens.weight"}, layer(
		"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
		"self_attn.q_norm", "self_attn.k_norm",
		"post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")...), "model.norm.weight")
	tests := []struct {
		arch string
		tied bool
		want []string
	}{
		{ArchLlama, true, llama},
		{ArchLlama, false, append(append([]string(nil), llama...), "lm_head.weight")},
		{ArchQwen3, true, qwen3},
		{ArchQwen3, false, append(append([]string(nil), qwen3...), "lm_head.weight")},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s tied=%v", tt.arch, tt.tied), func(t *testing.T) {
			o := tinySynth(tt.arch, 1)
			o.Layers, o.Tied = 1, tt.tied
			ts, err := SynthTensors(o)
			require.NoError(t, err)
			var have []string
			for _, x := range ts {
				have = append(have, x.Name)
			}
			assert.Equal(t, tt.want, have, "have %v; want %v", have, tt.want)
		})
	}
}

func TestSynthDeterministic(t *testing.T) {
	read := func(o SynthOptions) []byte {
		dir := t.TempDir()
		require.NoError(t, WriteSynthetic(dir, o))
		b, err := os.ReadFile(filepath.Join(dir, SingleFile))
		require.NoError(t, err)
		return b
	}
	o := tinySynth("llama", 7)
	a, b := read(o), read(o)
	assert.True(t, bytes.Equal(a, b), "same seed wrote different bytes")
	o.Seed = 8
	assert.False(t, bytes.Equal(a, read(o)), "different seeds wrote the same bytes")
}

// TestSynthScales checks the initialisation the doc comment promises, so the
// synthetic model's activations stay in a realistic range.
func TestSynthScales(t *testing.T) {
	o := DefaultSynth("qwen3")
	o.Layers = 1
	ts, err := SynthTensors(o)
	require.NoError(t, err)
	stats := func(x []float32) (mean, std float64) {
		for _, v := range x {
			mean += float64(v)
		}
		mean /= float64(len(x))
		for _, v := range x {
			std += (float64(v) - mean) * (float64(v) - mean)
		}
		return mean, math.Sqrt(std / float64(len(x)))
	}
	for _, x := range ts {
		mean, std := stats(x.Data)
		var wantMean, wantStd float64
		switch {
		case x.Name == nameEmbed:
			wantMean, wantStd = 0, embedStd
		case len(x.Shape) == 2:
			wantMean, wantStd = 0, 1/math.Sqrt(float64(x.Shape[1]))
		default:
			wantMean, wantStd = 1, 0.1
		}
		assert.InDelta(t, wantMean, mean, 4*wantStd/math.Sqrt(float64(len(x.Data))), "%s mean: have %v; want %v", x.Name, mean, wantMean)
		assert.InEpsilon(t, wantStd, std, 0.15, "%s std: have %v; want %v", x.Name, std, wantStd)
	}
}

// TestSynthConfigJSON checks config.json carries the keys real checkpoints
// carry, with HuggingFace's spelling, and reads back as the same Config.
func TestSynthConfigJSON(t *testing.T) {
	for _, arch := range []string{ArchLlama, ArchQwen3} {
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			o := tinySynth(arch, 1)
			o.DType = "bf16"
			require.NoError(t, WriteSynthetic(dir, o))
			raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(raw, &m))
			for key, want := range map[string]any{
				"architectures":  []any{arch},
				"model_type":     map[string]any{ArchLlama: "llama", ArchQwen3: "qwen3"}[arch],
				"torch_dtype":    "bfloat16",
				"hidden_act":     "silu",
				"attention_bias": false,
				"head_dim":       float64(8),
			} {
				assert.Equal(t, want, m[key], "%s: have %v; want %v", key, m[key], want)
			}
			assert.Contains(t, m, "rope_scaling")
			have, err := LoadConfig(dir)
			require.NoError(t, err)
			want, err := o.Config()
			require.NoError(t, err)
			assert.Equal(t, *want, *have, "have %+v; want %+v", *have, *want)
		})
	}
}

func TestSynthOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*SynthOptions)
		want string
	}{
		{"unknown arch", func(o *SynthOptions) { o.Arch = "gpt2" }, "architectures"},
		{"unknown dtype", func(o *SynthOptions) { o.DType = "f64" }, `DType is "f64"`},
		{"bad kv heads", func(o *SynthOptions) { o.KVHeads = 3 }, "num_key_value_heads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tinySynth("llama", 1)
			tt.edit(&o)
			assert.ErrorContains(t, WriteSynthetic(t.TempDir(), o), tt.want)
		})
	}
}

// TestWriteSyntheticTokenizer: a vocabulary with room for the special and
// byte tokens gets tokenizer files of the same size, Gemma-3 a Gemma-style
// SentencePiece one and the others a byte-level one; a tiny one gets none.
func TestWriteSyntheticTokenizer(t *testing.T) {
	tests := []struct {
		arch  string
		vocab int
		want  tokenizer.Scheme // "": no tokenizer
	}{
		{ArchLlama, 96, ""},
		{ArchLlama, 512, tokenizer.ByteLevelBPE},
		{ArchQwen3, 512, tokenizer.ByteLevelBPE},
		{ArchGemma3, tokenizer.MinSyntheticGemmaVocab - 1, ""},
		{ArchGemma3, 512, tokenizer.SentencePieceBPE},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.arch, tt.vocab), func(t *testing.T) {
			o := tinySynth(tt.arch, 1)
			o.Vocab = tt.vocab
			dir := t.TempDir()
			require.NoError(t, WriteSynthetic(dir, o))
			if tt.want == "" {
				_, err := tokenizer.Load(dir)
				assert.ErrorIs(t, err, os.ErrNotExist)
				return
			}
			tok, err := tokenizer.Load(dir)
			require.NoError(t, err)
			assert.Equal(t, tt.want, tok.Scheme(), "have %v; want %v", tok.Scheme(), tt.want)
			assert.Equal(t, tt.vocab, tok.VocabSize(), "have %d; want %d", tok.VocabSize(), tt.vocab)
			bos, _ := tok.BOS()
			assert.Equal(t, o.BOS, bos)
			assert.Contains(t, tok.EOS(), o.EOS)
			text := "Hello, wörld 日本"
			assert.Equal(t, text, tok.Decode(tok.Encode(text)))
		})
	}
}

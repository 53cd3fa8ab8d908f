package gguf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/tokenizer"
)

// small returns the options of a small synthetic model of arch.
func small(arch, dtype string) model.SynthOptions {
	o := model.DefaultSynth(arch)
	o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 64, 2, 4, 2, 16, 96, 300
	o.DType = dtype
	return o
}

// export writes o as a checkpoint, exports it and opens the GGUF file.
func export(t *testing.T, o model.SynthOptions) (*File, *Summary, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, o))
	out := filepath.Join(t.TempDir(), "model.gguf")
	s, err := ExportFile(dir, out)
	require.NoError(t, err)
	f, err := Open(out)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	fi, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), s.Bytes)
	return f, s, dir
}

// ggufNames maps llama.cpp's tensor names to HuggingFace's.
func ggufNames(o model.SynthOptions) map[string]string {
	m := map[string]string{"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
	if !o.Tied {
		m["output.weight"] = "lm_head.weight"
	}
	parts := map[string]string{
		"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
		"attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
		"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
	}
	if o.Arch == model.ArchQwen3 {
		parts["attn_q_norm"] = "self_attn.q_norm"
		parts["attn_k_norm"] = "self_attn.k_norm"
	}
	for l := range o.Layers {
		for g, h := range parts {
			m[fmt.Sprintf("blk.%d.%s.weight", l, g)] = fmt.Sprintf("model.layers.%d.%s.weight", l, h)
		}
	}
	return m
}

func TestExportTensors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    model.SynthOptions
	}{
		{"llama-f32-tied", small(model.ArchLlama, "f32")},
		{"llama-bf16-untied-sharded", func() model.SynthOptions {
			o := small(model.ArchLlama, "bf16")
			o.Tied, o.Shards = false, 3
			return o
		}()},
		{"qwen3-f16", small(model.ArchQwen3, "f16")},
		{"qwen3-bf16", small(model.ArchQwen3, "bf16")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			f, s, _ := export(t, o)
			want := ggufNames(o)
			llama3 := o.RopeScaling != nil
			names := map[string]bool{}
			for _, ti := range f.Tensors {
				names[ti.Name] = true
			}
			wantNames := map[string]bool{}
			for n := range want {
				wantNames[n] = true
			}
			if llama3 {
				wantNames["rope_freqs.weight"] = true
			}
			require.Equal(t, wantNames, names)
			assert.Equal(t, f.Tensors, s.Tensors)

			hfTensors, err := model.SynthTensors(o)
			require.NoError(t, err)
			byHF := map[string]*model.HostTensor{}
			for _, ht := range hfTensors {
				byHF[ht.Name] = ht
			}
			diskType := map[string]TensorType{"f32": F32, "bf16": BF16, "f16": F16}[o.DType]
			for g, h := range want {
				ht := byHF[h]
				ti, _ := f.Tensor(g)
				// Dims are the shape reversed; matrices keep their dtype,
				// norms become F32.
				assert.Equal(t, ggufDims(ht.Shape), ti.Dims, g)
				if len(ht.Shape) == 2 {
					assert.Equal(t, diskType, ti.Type, g)
				} else {
					assert.Equal(t, F32, ti.Type, g)
				}
				wantVals := ht.Data
				heads := map[string]int{"attn_q": o.Heads, "attn_k": o.KVHeads}[partOf(g)]
				if o.Arch == model.ArchLlama && heads > 0 {
					wantVals = PermuteRoPE(wantVals, heads, o.HeadDim, o.Hidden)
				}
				got, err := f.ReadFloat32(g)
				require.NoError(t, err)
				require.Equal(t, len(wantVals), len(got), g)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(wantVals[i]) {
						t.Fatalf("%s[%d] = %v; want %v (bit for bit)", g, i, got[i], wantVals[i])
					}
				}
			}
			// Qwen3's q and k rows keep HuggingFace's order.
			if o.Arch == model.ArchQwen3 {
				got, _ := f.ReadFloat32("blk.1.attn_q.weight")
				assert.Equal(t, byHF["model.layers.1.self_attn.q_proj.weight"].Data, got)
			}
		})
	}
}

// partOf returns the part of a per-layer name: "attn_q" of
// "blk.1.attn_q.weight".
func partOf(name string) string {
	var l int
	var part string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &l, &part); n == 2 {
		return part[:len(part)-len(".weight")]
	}
	return ""
}

func TestExportMetadata(t *testing.T) {
	for _, arch := range []string{model.ArchLlama, model.ArchQwen3} {
		t.Run(arch, func(t *testing.T) {
			o := small(arch, "bf16")
			f, s, dir := export(t, o)
			a := map[string]string{model.ArchLlama: "llama", model.ArchQwen3: "qwen3"}[arch]
			assert.Equal(t, a, s.Arch)
			get := func(key string) any {
				v, ok := f.Value(key)
				require.True(t, ok, "key %s is missing", key)
				return v
			}
			assert.Equal(t, a, get("general.architecture"))
			assert.Equal(t, uint32(32), get("general.file_type"), "MOSTLY_BF16")
			assert.Equal(t, uint32(o.MaxPositions), get(a+".context_length"))
			assert.Equal(t, uint32(o.Hidden), get(a+".embedding_length"))
			assert.Equal(t, uint32(o.Layers), get(a+".block_count"))
			assert.Equal(t, uint32(o.Intermediate), get(a+".feed_forward_length"))
			assert.Equal(t, uint32(o.Heads), get(a+".attention.head_count"))
			assert.Equal(t, uint32(o.KVHeads), get(a+".attention.head_count_kv"))
			assert.Equal(t, uint32(o.HeadDim), get(a+".attention.key_length"))
			assert.Equal(t, uint32(o.HeadDim), get(a+".attention.value_length"))
			assert.Equal(t, uint32(o.HeadDim), get(a+".rope.dimension_count"))
			assert.Equal(t, float32(o.RopeTheta), get(a+".rope.freq_base"))
			assert.Equal(t, float32(o.RMSNormEps), get(a+".attention.layer_norm_rms_epsilon"))
			assert.Equal(t, uint32(o.Vocab), get(a+".vocab_size"))

			// The vocabulary is tokenizer.json's, id for id.
			assert.Equal(t, "gpt2", get("tokenizer.ggml.model"))
			assert.Equal(t, "llama-bpe", get("tokenizer.ggml.pre"), "the synthetic tokenizer splits as Llama 3's")
			var tj tokenizerJSON
			raw, err := os.ReadFile(filepath.Join(dir, tokenizer.TokenizerFile))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(raw, &tj))
			tokens := get("tokenizer.ggml.tokens").([]string)
			types := get("tokenizer.ggml.token_type").([]int32)
			require.Len(t, tokens, o.Vocab)
			require.Len(t, types, o.Vocab)
			for text, id := range tj.Model.Vocab {
				assert.Equal(t, text, tokens[id])
				assert.Equal(t, TokenNormal, types[id])
			}
			for _, at := range tj.AddedTokens {
				assert.Equal(t, at.Content, tokens[at.ID])
				assert.Equal(t, TokenControl, types[at.ID])
			}
			merges := get("tokenizer.ggml.merges").([]string)
			require.Len(t, merges, len(tj.Model.Merges))
			var first []string
			require.NoError(t, json.Unmarshal(tj.Model.Merges[0], &first))
			assert.Equal(t, first[0]+" "+first[1], merges[0])

			tok, err := tokenizer.Load(dir)
			require.NoError(t, err)
			bos, _ := tok.BOS()
			assert.Equal(t, uint32(bos), get("tokenizer.ggml.bos_token_id"))
			assert.Equal(t, uint32(tok.EOS()[0]), get("tokenizer.ggml.eos_token_id"))
			assert.Equal(t, tokenizer.SynthEOT, tokens[tok.EOS()[0]], "eos is tokenizer_config's eos_token")
			assert.Equal(t, true, get("tokenizer.ggml.add_bos_token"))
			assert.Equal(t, tokenizer.Llama3ChatTemplate, get("tokenizer.chat_template"))
		})
	}
}

// llama.cpp divides each RoPE frequency theta^(-2i/d) by rope_freqs[i];
// the quotients must be the frequencies this engine rotates by.
func TestRopeFactorsMatchTheEngine(t *testing.T) {
	o := model.DefaultSynth(model.ArchLlama)
	c, err := o.Config()
	require.NoError(t, err)
	factors := RopeFactors(c)
	scaled := c.InvFreq()
	plain := *c
	plain.RopeScaling = nil
	base := plain.InvFreq()
	require.Len(t, factors, c.HeadDim/2)
	assert.Equal(t, float32(1), factors[0], "short wavelengths are kept")
	assert.Equal(t, float32(o.RopeScaling.Factor), factors[len(factors)-1], "long ones are stretched by factor")
	for i := range factors {
		assert.InEpsilon(t, scaled[i], base[i]/factors[i], 1e-6, "frequency %d", i)
	}

	f, _, _ := export(t, small(model.ArchLlama, "f32"))
	got, err := f.ReadFloat32("rope_freqs.weight")
	require.NoError(t, err)
	sc, err := small(model.ArchLlama, "f32").Config()
	require.NoError(t, err)
	assert.Equal(t, RopeFactors(sc), got)
}

func TestExportRefusals(t *testing.T) {
	// No tokenizer (too small a vocabulary for the synthetic one).
	dir := t.TempDir()
	o := small(model.ArchLlama, "f32")
	o.Vocab = 100
	require.NoError(t, model.WriteSynthetic(dir, o))
	_, err := ExportFile(dir, filepath.Join(t.TempDir(), "x.gguf"))
	assert.ErrorContains(t, err, "vocabulary")

	// A pre-tokenizer llama.cpp would split differently.
	dir = t.TempDir()
	require.NoError(t, model.WriteSynthetic(dir, small(model.ArchLlama, "f32")))
	path := filepath.Join(dir, tokenizer.TokenizerFile)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	pre := doc["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
	pre["pattern"] = map[string]any{"Regex": `\p{L}+|\s+|.`}
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	out := filepath.Join(t.TempDir(), "x.gguf")
	_, err = ExportFile(dir, out)
	assert.ErrorContains(t, err, "pre-tokenizer")
	_, statErr := os.Stat(out)
	assert.True(t, os.IsNotExist(statErr), "no partial file is left")
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Empty(t, entries, "nor a temporary one")

	// A Gemma-3 whose query scale llama.cpp would not apply (the synthetic
	// default keeps query_pre_attn_scalar 64 at head_dim 16).
	dir = t.TempDir()
	g := model.DefaultSynth(model.ArchGemma3)
	g.Vocab, g.Hidden, g.Intermediate, g.Layers, g.Heads, g.KVHeads, g.HeadDim = 512, 32, 64, 2, 2, 1, 16
	require.NoError(t, model.WriteSynthetic(dir, g))
	_, err = ExportFile(dir, filepath.Join(t.TempDir(), "x.gguf"))
	assert.ErrorContains(t, err, "query_pre_attn_scalar is 64")
}

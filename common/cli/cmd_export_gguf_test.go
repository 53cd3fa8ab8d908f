package cli

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/gguf"
)

func TestExportGGUF(t *testing.T) {
	dir := smallModel(t, "llama")
	out := filepath.Join(t.TempDir(), "m.gguf")
	code, stdout, stderr := run("export-gguf", "-model", dir, "-out", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "wrote "+out+": llama, 21 tensors (21 F32, 0 BF16, 0 F16), vocab 300 (pre-tokenizer llama-bpe)")

	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	arch, _ := f.Value("general.architecture")
	assert.Equal(t, "llama", arch)
	_, tied := f.Tensor("output.weight")
	assert.False(t, tied, "tied embeddings: llama.cpp reuses token_embd")
}

func TestExportGGUFUsage(t *testing.T) {
	code, _, stderr := run("export-gguf")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "-out: required")

	code, _, stderr = run("export-gguf", "-model", t.TempDir(), "-out", filepath.Join(t.TempDir(), "x.gguf"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "config.json")
}

// smallGemma writes a small bf16 Gemma-3 whose query_pre_attn_scalar is
// its head_dim, as llama.cpp assumes.
func smallGemma(t *testing.T) string {
	t.Helper()
	o := model.DefaultSynth(model.ArchGemma3)
	o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 64, 6, 4, 1, 16, 128, 400
	o.QueryPreAttnScalar, o.DType = 16, "bf16"
	dir := filepath.Join(t.TempDir(), "gemma3")
	require.NoError(t, model.WriteSynthetic(dir, o))
	return dir
}

func TestExportGGUFGemma3(t *testing.T) {
	dir := smallGemma(t)
	out := filepath.Join(t.TempDir(), "g.gguf")
	code, stdout, stderr := run("export-gguf", "-model", dir, "-out", out)
	require.Equal(t, 0, code, stderr)
	// Per layer 4 projections, 3 MLP weights (bf16) and 6 norms (F32);
	// the embeddings and the final norm: 6·13 + 2.
	assert.Contains(t, stdout, "wrote "+out+": gemma3, 80 tensors (37 F32, 43 BF16, 0 F16), vocab 400 (pre-tokenizer default)")

	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	for key, want := range map[string]any{
		"general.architecture":                    "gemma3",
		"gemma3.attention.sliding_window":         uint32(512),
		"gemma3.attention.sliding_window_pattern": uint32(6),
		"gemma3.rope.freq_base":                   float32(1000000),
		"gemma3.rope.freq_base_swa":               float32(10000),
		"gemma3.attention.key_length":             uint32(16),
		"gemma3.attention.head_count_kv":          uint32(1),
		"tokenizer.ggml.model":                    "llama",
		"tokenizer.ggml.add_space_prefix":         false,
		"tokenizer.ggml.add_bos_token":            true,
		"tokenizer.ggml.bos_token_id":             uint32(2),
		"tokenizer.ggml.eos_token_id":             uint32(1),
		"gemma3.attention.layer_norm_rms_epsilon": float32(1e-6),
	} {
		got, ok := f.Value(key)
		if assert.True(t, ok, key) {
			assert.Equal(t, want, got, key)
		}
	}
	_, tied := f.Tensor("output.weight")
	assert.False(t, tied, "tied embeddings: llama.cpp reuses token_embd")

	// Norms are 1 + Gemma's weight, as F32; projections keep their bits.
	ck, err := model.OpenCheckpoint(dir)
	require.NoError(t, err)
	defer ck.Close()
	hf, err := ck.Read("model.layers.2.post_feedforward_layernorm.weight", 64)
	require.NoError(t, err)
	norm, err := f.ReadFloat32("blk.2.post_ffw_norm.weight")
	require.NoError(t, err)
	for i, x := range hf.Data {
		require.Equal(t, 1+x, norm[i], i)
	}
	hf, err = ck.Read("model.layers.5.self_attn.k_proj.weight", 16, 64)
	require.NoError(t, err)
	k, err := f.ReadFloat32("blk.5.attn_k.weight")
	require.NoError(t, err)
	assert.Equal(t, hf.Data, k)

	// The vocabulary: byte tokens typed as such, merged tokens scored by
	// their merge's rank, the rest 0.
	tokens, _ := f.Value("tokenizer.ggml.tokens")
	types, _ := f.Value("tokenizer.ggml.token_type")
	scores, _ := f.Value("tokenizer.ggml.scores")
	toks, typs, scs := tokens.([]string), types.([]int32), scores.([]float32)
	require.Len(t, toks, 400)
	id := slices.Index(toks, "<0x41>")
	require.GreaterOrEqual(t, id, 0)
	assert.Equal(t, int32(6), typs[id])
	assert.Equal(t, gguf.TokenControl, typs[slices.Index(toks, "<bos>")])
	merged := 0
	for i, s := range scs {
		if s < 0 {
			merged++
			assert.Equal(t, gguf.TokenNormal, typs[i], toks[i])
		}
	}
	assert.Positive(t, merged)
}

func TestExportGGUFGemma3Refusals(t *testing.T) {
	// init-model keeps the default query_pre_attn_scalar (64) at head_dim 16.
	dir := smallModel(t, "gemma3")
	code, _, stderr := run("export-gguf", "-model", dir, "-out", filepath.Join(t.TempDir(), "x.gguf"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "query_pre_attn_scalar is 64")
}

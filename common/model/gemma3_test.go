package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// gemma3TestConfig is a config.json in the shape of a published Gemma-3
// text checkpoint (small sizes): no layer_types, so the pattern decides.
const gemma3TestConfig = `{
  "architectures": ["Gemma3ForCausalLM"],
  "model_type": "gemma3_text",
  "vocab_size": 100, "hidden_size": 32, "intermediate_size": 64,
  "num_hidden_layers": 13, "num_attention_heads": 4, "num_key_value_heads": 1,
  "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
  "query_pre_attn_scalar": 16, "sliding_window": 512, "sliding_window_pattern": 6,
  "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": null,
  "final_logit_softcapping": null, "attn_logit_softcapping": null,
  "rms_norm_eps": 1e-06, "bos_token_id": 2, "eos_token_id": [1, 50], "pad_token_id": 0,
  "torch_dtype": "bfloat16"
}`

func TestGemma3ParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(gemma3TestConfig))
	require.NoError(t, err)
	for l := range 13 {
		// Layers 5 and 11 (the 6th and 12th) are global.
		want, wantType := 512, LayerSliding
		if l == 5 || l == 11 {
			want, wantType = 0, LayerFull
		}
		assert.Equal(t, wantType, c.LayerTypes[l], "layer %d", l)
		assert.Equal(t, want, c.LayerWindow(l), "layer %d", l)
	}
	assert.Equal(t, 10000.0, c.RopeLocalBaseFreq)
	assert.Equal(t, 16.0, c.QueryPreAttnScalar)
	assert.Zero(t, c.FinalLogitSoftcapping)
	assert.NotEqual(t, c.InvFreq(), c.InvFreqLocal(), "global and local layers rotate with different thetas")

	// Defaults of HuggingFace's Gemma3TextConfig when the keys are absent.
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(gemma3TestConfig), &j))
	for _, k := range []string{"sliding_window", "sliding_window_pattern", "rope_theta", "rope_local_base_freq", "query_pre_attn_scalar"} {
		delete(j, k)
	}
	raw, _ := json.Marshal(j)
	c, err = ParseConfig(raw)
	require.NoError(t, err)
	assert.Equal(t, 4096, c.SlidingWindow)
	assert.Equal(t, 1e6, c.RopeTheta)
	assert.Equal(t, 256.0, c.QueryPreAttnScalar)
	assert.Equal(t, LayerFull, c.LayerTypes[5])

	bad := map[string]string{
		`"hidden_activation": "gelu"`:                               `hidden_activation is "gelu"`,
		`"layer_types": ["full_attention"]`:                         "layer_types has 1 entries for 13 layers",
		`"use_bidirectional_attention": true`:                       "use_bidirectional_attention",
		`"sliding_window": 0`:                                       "sliding_window is 0",
		`"rope_scaling": {"rope_type": "linear"}`:                   "rope_scaling.factor is missing",
		`"layer_types": ["sliding_attention", "chunked_attention"]`: "layer_types",
	}
	for patch, want := range bad {
		var j map[string]any
		require.NoError(t, json.Unmarshal([]byte(gemma3TestConfig), &j))
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte("{"+patch+"}"), &p))
		for k, v := range p {
			j[k] = v
		}
		raw, _ := json.Marshal(j)
		_, err := ParseConfig(raw)
		require.Error(t, err, patch)
		assert.Contains(t, err.Error(), want, patch)
	}
}

// gemma3Tiny is a tiny Gemma-3 whose sliding layers' window (4) is shorter
// than the test prompts, with both soft caps on.
func gemma3Tiny(seed int64) SynthOptions {
	o := tinySynth(ArchGemma3, seed)
	o.Layers, o.SlidingWindow, o.SlidingWindowPattern = 3, 4, 3
	o.FinalSoftcap, o.AttnSoftcap = 20, 10
	return o
}

func TestGemma3SynthConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	o := gemma3Tiny(1)
	o.RopeScaling = &RopeScaling{RopeType: "linear", Factor: 8}
	require.NoError(t, WriteSynthetic(dir, o))
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	require.NoError(t, err)
	var j map[string]any
	require.NoError(t, json.Unmarshal(raw, &j))
	assert.Equal(t, "gelu_pytorch_tanh", j["hidden_activation"])
	assert.NotContains(t, j, "hidden_act")
	assert.Equal(t, float64(3), j["sliding_window_pattern"])
	have, err := LoadConfig(dir)
	require.NoError(t, err)
	want, err := o.Config()
	require.NoError(t, err)
	assert.Equal(t, *want, *have)

	m, err := Load(dir, cpu.New())
	require.NoError(t, err)
	defer m.Close()
	for name, tensor := range map[string]string{"pre_feedforward_layernorm": "preFFNorm", "post_feedforward_layernorm": "postFFNorm"} {
		assert.NotNil(t, m.weights[layerName(2, name)], tensor)
	}
	assert.Equal(t, []int{4, 4, 0}, []int{m.layers[0].window, m.layers[1].window, m.layers[2].window})
}

// TestGemma3SchedulesAgree is TestForwardSchedulesAgree on a Gemma-3 whose
// window is shorter than the prompts: a whole-prompt prefill, mixed chunks
// through the paged cache and token-by-token decoding must agree past the
// window, where each chunk's queries reach back into earlier chunks' keys
// only as far as the window allows.
func TestGemma3SchedulesAgree(t *testing.T) {
	m := loadSynth(t, gemma3Tiny(9))
	prompts := testPrompts(m.Config.VocabSize, 5, 9, 21)
	ref := lastLogitsLocal(m, prompts, nil)
	exact := lastLogitsLocal(m, prompts, newPagedKV(m, 16, 4))
	assert.Equal(t, ref, exact, "a local prefill writing the cache changes no bit")
	for _, chunks := range [][]int{{1, 3, 5}, {1, 1, 1}, {4, 4, 4}, {7, 2, 9}} {
		have := lastLogitsChunked(m, prompts, chunks, newPagedKV(m, 16, 4))
		for i := range prompts {
			err := maxRelErr(have[i], ref[i])
			assert.LessOrEqual(t, err, 1e-5, "chunks %v, prompt %d: max relative error %g", chunks, i, err)
		}
	}
}

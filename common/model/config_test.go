package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// llama32Config is Llama-3.2-1B's config.json, trimmed of keys we ignore.
const llama32Config = `{
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
}`

// qwen3Config is Qwen3-0.6B's config.json: head_dim is given explicitly and
// is not hidden_size/num_attention_heads.
const qwen3Config = `{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "use_sliding_window": false,
  "vocab_size": 151936
}`

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Config
	}{
		{
			name: "llama 3.2",
			json: llama32Config,
			want: Config{
				Arch: ArchLlama, ModelType: "llama", VocabSize: 128256, HiddenSize: 2048,
				IntermediateSize: 8192, NumHiddenLayers: 16, NumAttentionHeads: 32,
				NumKeyValueHeads: 8, HeadDim: 64, RMSNormEps: 1e-5, RopeTheta: 500000,
				RopeScaling: &RopeScaling{RopeType: "llama3", Factor: 32, LowFreqFactor: 1,
					HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192},
				MaxPositionEmbeddings: 131072, TieWordEmbeddings: true, TorchDType: "bfloat16",
				BOSTokenID: 128000, EOSTokenIDs: []int32{128001, 128008, 128009},
			},
		},
		{
			name: "qwen3",
			json: qwen3Config,
			want: Config{
				Arch: ArchQwen3, ModelType: "qwen3", VocabSize: 151936, HiddenSize: 1024,
				IntermediateSize: 3072, NumHiddenLayers: 28, NumAttentionHeads: 16,
				NumKeyValueHeads: 8, HeadDim: 128, RMSNormEps: 1e-6, RopeTheta: 1e6,
				MaxPositionEmbeddings: 40960, TieWordEmbeddings: true, TorchDType: "bfloat16",
				BOSTokenID: 151643, EOSTokenIDs: []int32{151645},
			},
		},
		{
			name: "defaults",
			json: `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
				"intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}`,
			want: Config{
				Arch: ArchLlama, VocabSize: 10, HiddenSize: 8, IntermediateSize: 16,
				NumHiddenLayers: 1, NumAttentionHeads: 2,
				NumKeyValueHeads: 2,    // = num_attention_heads
				HeadDim:          4,    // = hidden_size / num_attention_heads
				RMSNormEps:       1e-6, // HuggingFace's default
				RopeTheta:        10000,
				BOSTokenID:       -1,
			},
		},
		{
			name: "old rope_scaling key and dtype key",
			json: `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8,
				"intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
				"dtype": "float32", "bos_token_id": null, "eos_token_id": null,
				"rope_scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1,
				"high_freq_factor": 4, "original_max_position_embeddings": 8192}}`,
			want: Config{
				Arch: ArchLlama, VocabSize: 10, HiddenSize: 8, IntermediateSize: 16,
				NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 2, HeadDim: 4,
				RMSNormEps: 1e-6, RopeTheta: 10000, TorchDType: "float32", BOSTokenID: -1,
				RopeScaling: &RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1,
					HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192},
			},
		},
		{
			name: "default rope type means no scaling",
			json: `{"architectures": ["Qwen3ForCausalLM"], "vocab_size": 10, "hidden_size": 8,
				"intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
				"rope_scaling": {"rope_type": "default"}}`,
			want: Config{
				Arch: ArchQwen3, VocabSize: 10, HiddenSize: 8, IntermediateSize: 16,
				NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 2, HeadDim: 4,
				RMSNormEps: 1e-6, RopeTheta: 10000, BOSTokenID: -1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have, err := ParseConfig([]byte(tt.json))
			require.NoError(t, err)
			assert.Equal(t, tt.want, *have, "have %+v; want %+v", *have, tt.want)
		})
	}
}

// TestParseConfigErrors checks that each rejected config names the field at
// fault, since that is what a user has to go and fix.
func TestParseConfigErrors(t *testing.T) {
	// base is a valid config; each case overrides or adds keys.
	const base = `"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
		"num_hidden_layers": 1, "num_attention_heads": 2`
	tests := []struct {
		name string
		json string
		want string
	}{
		{"bad JSON", `{"architectures": [`, "bad JSON"},
		{"wrong type", `{"architectures": ["LlamaForCausalLM"], "hidden_size": "big"}`, "hidden_size"},
		{"unknown architecture", `{"architectures": ["MistralForCausalLM"], ` + base + `}`, `architectures is ["MistralForCausalLM"]`},
		{"two architectures", `{"architectures": ["LlamaForCausalLM", "Qwen3ForCausalLM"], ` + base + `}`, "architectures"},
		{"no architecture", `{` + base + `}`, "architectures"},
		{"zero vocab", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "vocab_size": 0}`, "vocab_size is 0"},
		{"missing hidden_size", `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "intermediate_size": 16,
			"num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 4}`, "hidden_size is 0"},
		{"negative layers", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "num_hidden_layers": -1}`, "num_hidden_layers is -1"},
		{"zero heads", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "num_attention_heads": 0, "head_dim": 4}`, "num_attention_heads is 0"},
		{"kv heads do not divide", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "num_attention_heads": 4, "num_key_value_heads": 3, "head_dim": 2}`, "num_key_value_heads (3)"},
		{"odd head_dim", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "head_dim": 3}`, "head_dim is 3"},
		{"zero eps", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rms_norm_eps": 0}`, "rms_norm_eps"},
		{"negative theta", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rope_theta": -1}`, "rope_theta"},
		{"unknown rope type", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rope_scaling": {"rope_type": "yarn", "factor": 4}}`, `rope_scaling.rope_type is "yarn"`},
		{"unknown old rope type", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rope_scaling": {"type": "dynamic", "factor": 4}}`, `rope_scaling.rope_type is "dynamic"`},
		{"llama3 without factor", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rope_scaling": {"rope_type": "llama3",
			"low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 8192}}`, "rope_scaling.factor"},
		{"llama3 high <= low", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rope_scaling": {"rope_type": "llama3",
			"factor": 8, "low_freq_factor": 4, "high_freq_factor": 4, "original_max_position_embeddings": 8192}}`, "rope_scaling.high_freq_factor"},
		{"llama3 without original length", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "rope_scaling": {"rope_type": "llama3",
			"factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}}`, "rope_scaling.original_max_position_embeddings"},
		{"eos not an int", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "eos_token_id": "</s>"}`, "eos_token_id"},
		{"eos outside vocab", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "eos_token_id": [1, 10]}`, "eos_token_id 10"},
		{"gelu", `{"architectures": ["LlamaForCausalLM"], ` + base + `, "hidden_act": "gelu"}`, "hidden_act"},
		{"attention bias", `{"architectures": ["Qwen3ForCausalLM"], ` + base + `, "attention_bias": true}`, "attention_bias"},
		{"sliding window", `{"architectures": ["Qwen3ForCausalLM"], ` + base + `, "use_sliding_window": true}`, "use_sliding_window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have, err := ParseConfig([]byte(tt.json))
			require.Error(t, err, "have config %+v; want an error", have)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestLoadConfigNamesFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"architectures": ["GPT2LMHeadModel"]}`), 0o644))
	_, err := LoadConfig(dir)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "config.json: architectures"), "have %q; want it to start with the file and field", err)

	_, err = LoadConfig(t.TempDir())
	assert.ErrorContains(t, err, "config.json")
}

package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Architectures this package runs, spelled as in config.json's
// "architectures" list.
const (
	ArchLlama = "LlamaForCausalLM"
	ArchQwen3 = "Qwen3ForCausalLM"
)

// ConfigFile is the name of the HuggingFace model configuration file.
const ConfigFile = "config.json"

// Config is the subset of a HuggingFace config.json that the forward needs.
// Field comments give the JSON key; defaults follow the HuggingFace config
// classes for Llama and Qwen3.
type Config struct {
	Arch                  string       // architectures[0]: ArchLlama or ArchQwen3
	ModelType             string       // model_type, informational
	VocabSize             int          // vocab_size
	HiddenSize            int          // hidden_size
	IntermediateSize      int          // intermediate_size
	NumHiddenLayers       int          // num_hidden_layers
	NumAttentionHeads     int          // num_attention_heads
	NumKeyValueHeads      int          // num_key_value_heads; default num_attention_heads
	HeadDim               int          // head_dim; default hidden_size/num_attention_heads
	RMSNormEps            float64      // rms_norm_eps; default 1e-6
	RopeTheta             float64      // rope_theta; default 10000
	RopeScaling           *RopeScaling // rope_scaling; nil when null, absent or "default"
	MaxPositionEmbeddings int          // max_position_embeddings
	TieWordEmbeddings     bool         // tie_word_embeddings; default false
	TorchDType            string       // torch_dtype (or dtype in newer files), informational
	BOSTokenID            int32        // bos_token_id; -1 when null or absent
	EOSTokenIDs           []int32      // eos_token_id, an int or a list
}

// RopeScaling holds Llama 3's RoPE frequency scaling parameters
// (rope_scaling with rope_type "llama3").
type RopeScaling struct {
	RopeType                      string  // "llama3"
	Factor                        float64 // factor
	LowFreqFactor                 float64 // low_freq_factor
	HighFreqFactor                float64 // high_freq_factor
	OriginalMaxPositionEmbeddings int     // original_max_position_embeddings
}

// configJSON mirrors config.json. Pointers tell "absent" from zero where a
// default depends on other fields.
type configJSON struct {
	Architectures         []string        `json:"architectures"`
	ModelType             string          `json:"model_type"`
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	TorchDType            string          `json:"torch_dtype"`
	DType                 string          `json:"dtype"`
	BOSTokenID            *int32          `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	HiddenAct             *string         `json:"hidden_act"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	UseSlidingWindow      bool            `json:"use_sliding_window"`
}

type ropeScalingJSON struct {
	RopeType                      string   `json:"rope_type"`
	Type                          string   `json:"type"` // the key older files use
	Factor                        *float64 `json:"factor"`
	LowFreqFactor                 *float64 `json:"low_freq_factor"`
	HighFreqFactor                *float64 `json:"high_freq_factor"`
	OriginalMaxPositionEmbeddings *int     `json:"original_max_position_embeddings"`
}

// LoadConfig reads and validates dir/config.json.
func LoadConfig(dir string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	return c, nil
}

// ParseConfig decodes and validates the contents of a config.json.
func ParseConfig(data []byte) (*Config, error) {
	var j configJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if len(j.Architectures) != 1 || (j.Architectures[0] != ArchLlama && j.Architectures[0] != ArchQwen3) {
		return nil, fmt.Errorf("architectures is %q; want exactly one of [%q %q]", j.Architectures, ArchLlama, ArchQwen3)
	}
	// These options change the computation; refusing them beats silently
	// computing something else.
	if j.HiddenAct != nil && *j.HiddenAct != "silu" {
		return nil, fmt.Errorf("hidden_act is %q; only \"silu\" is supported", *j.HiddenAct)
	}
	if j.AttentionBias {
		return nil, fmt.Errorf("attention_bias is true; only bias-free projections are supported")
	}
	if j.MLPBias {
		return nil, fmt.Errorf("mlp_bias is true; only bias-free projections are supported")
	}
	if j.UseSlidingWindow {
		return nil, fmt.Errorf("use_sliding_window is true; only full attention is supported")
	}

	c := &Config{
		Arch:                  j.Architectures[0],
		ModelType:             j.ModelType,
		VocabSize:             j.VocabSize,
		HiddenSize:            j.HiddenSize,
		IntermediateSize:      j.IntermediateSize,
		NumHiddenLayers:       j.NumHiddenLayers,
		NumAttentionHeads:     j.NumAttentionHeads,
		NumKeyValueHeads:      j.NumAttentionHeads,
		RMSNormEps:            1e-6,
		RopeTheta:             10000,
		MaxPositionEmbeddings: j.MaxPositionEmbeddings,
		TieWordEmbeddings:     j.TieWordEmbeddings,
		TorchDType:            j.TorchDType,
		BOSTokenID:            -1,
	}
	if c.TorchDType == "" {
		c.TorchDType = j.DType
	}
	if j.NumKeyValueHeads != nil {
		c.NumKeyValueHeads = *j.NumKeyValueHeads
	}
	if j.HeadDim != nil {
		c.HeadDim = *j.HeadDim
	} else if c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if j.RMSNormEps != nil {
		c.RMSNormEps = *j.RMSNormEps
	}
	if j.RopeTheta != nil {
		c.RopeTheta = *j.RopeTheta
	}
	if j.BOSTokenID != nil {
		c.BOSTokenID = *j.BOSTokenID
	}
	var err error
	if c.EOSTokenIDs, err = parseEOS(j.EOSTokenID); err != nil {
		return nil, err
	}
	if c.RopeScaling, err = parseRopeScaling(j.RopeScaling); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseEOS accepts the three spellings HuggingFace uses: absent/null, one
// id, or a list of ids (Llama 3 instruct models stop on several).
func parseEOS(raw json.RawMessage) ([]int32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int32
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int32{one}, nil
	}
	var list []int32
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("eos_token_id is %s; want an integer or a list of integers", raw)
	}
	return list, nil
}

func parseRopeScaling(raw json.RawMessage) (*RopeScaling, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var j ropeScalingJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("rope_scaling: %w", err)
	}
	typ := j.RopeType
	if typ == "" {
		typ = j.Type
	}
	switch typ {
	case "default":
		return nil, nil
	case "llama3":
	default:
		return nil, fmt.Errorf("rope_scaling.rope_type is %q; want \"llama3\" or \"default\"", typ)
	}
	need := func(name string, v *float64) (float64, error) {
		if v == nil {
			return 0, fmt.Errorf("rope_scaling.%s is missing; rope_type \"llama3\" needs it", name)
		}
		return *v, nil
	}
	rs := &RopeScaling{RopeType: typ}
	var err error
	if rs.Factor, err = need("factor", j.Factor); err != nil {
		return nil, err
	}
	if rs.LowFreqFactor, err = need("low_freq_factor", j.LowFreqFactor); err != nil {
		return nil, err
	}
	if rs.HighFreqFactor, err = need("high_freq_factor", j.HighFreqFactor); err != nil {
		return nil, err
	}
	if j.OriginalMaxPositionEmbeddings == nil {
		return nil, fmt.Errorf("rope_scaling.original_max_position_embeddings is missing; rope_type \"llama3\" needs it")
	}
	rs.OriginalMaxPositionEmbeddings = *j.OriginalMaxPositionEmbeddings
	return rs, nil
}

// Validate checks that the sizes describe a model the forward can run. Every
// error names the config.json field at fault.
func (c *Config) Validate() error {
	if c.Arch != ArchLlama && c.Arch != ArchQwen3 {
		return fmt.Errorf("architectures is [%q]; want one of [%q %q]", c.Arch, ArchLlama, ArchQwen3)
	}
	positive := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize},
		{"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%s is %d; want > 0", p.name, p.v)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads (%d) is not a multiple of num_key_value_heads (%d)", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	// RoPE rotates pairs (i, i+head_dim/2).
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim is %d; want an even number", c.HeadDim)
	}
	if !(c.RMSNormEps > 0) {
		return fmt.Errorf("rms_norm_eps is %v; want > 0", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) {
		return fmt.Errorf("rope_theta is %v; want > 0", c.RopeTheta)
	}
	if c.BOSTokenID >= int32(c.VocabSize) {
		return fmt.Errorf("bos_token_id is %d; want < vocab_size (%d)", c.BOSTokenID, c.VocabSize)
	}
	for _, id := range c.EOSTokenIDs {
		if id < 0 || id >= int32(c.VocabSize) {
			return fmt.Errorf("eos_token_id %d is outside [0, vocab_size=%d)", id, c.VocabSize)
		}
	}
	if rs := c.RopeScaling; rs != nil {
		if rs.RopeType != "llama3" {
			return fmt.Errorf("rope_scaling.rope_type is %q; want \"llama3\" or \"default\"", rs.RopeType)
		}
		if !(rs.Factor > 0) {
			return fmt.Errorf("rope_scaling.factor is %v; want > 0", rs.Factor)
		}
		if !(rs.LowFreqFactor > 0) {
			return fmt.Errorf("rope_scaling.low_freq_factor is %v; want > 0", rs.LowFreqFactor)
		}
		// The smoothing divides by high_freq_factor - low_freq_factor.
		if !(rs.HighFreqFactor > rs.LowFreqFactor) {
			return fmt.Errorf("rope_scaling.high_freq_factor is %v; want > low_freq_factor (%v)", rs.HighFreqFactor, rs.LowFreqFactor)
		}
		if rs.OriginalMaxPositionEmbeddings <= 0 {
			return fmt.Errorf("rope_scaling.original_max_position_embeddings is %d; want > 0", rs.OriginalMaxPositionEmbeddings)
		}
	}
	return nil
}

// QDim is the width of the query projection's output: heads × head_dim.
func (c *Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// KVDim is the width of one token's keys (or values): kv_heads × head_dim.
// It is the column count of the KV cache tensors.
func (c *Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

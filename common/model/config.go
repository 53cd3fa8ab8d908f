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
	// ArchGemma3 is Gemma-3's text-only model (model_type "gemma3_text").
	ArchGemma3 = "Gemma3ForCausalLM"
)

// Gemma-3 layer types, spelled as in config.json's layer_types.
const (
	LayerSliding = "sliding_attention"
	LayerFull    = "full_attention"
)

// gemma3 holds the Gemma-3 fields of a Config (zero for other
// architectures).
type gemma3 struct {
	SlidingWindow         int      // sliding_window: keys a local layer's query sees, its own included
	LayerTypes            []string // layer_types, or derived from sliding_window_pattern (default 6)
	RopeLocalBaseFreq     float64  // rope_local_base_freq: RoPE theta of sliding layers; default 10000
	QueryPreAttnScalar    float64  // query_pre_attn_scalar: the attention scale is its -1/2 power
	FinalLogitSoftcapping float64  // final_logit_softcapping; 0 when null
	AttnLogitSoftcapping  float64  // attn_logit_softcapping; 0 when null
}

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

	gemma3
}

// RopeScaling holds RoPE frequency scaling parameters: Llama 3's
// (rope_type "llama3") or linear position interpolation (rope_type "linear",
// which uses only Factor; Gemma-3's larger models scale their global layers
// so).
type RopeScaling struct {
	RopeType                      string  // "llama3" or "linear"
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

	// Gemma-3.
	HiddenActivation          *string  `json:"hidden_activation"`
	SlidingWindow             *int     `json:"sliding_window"`
	SlidingWindowPattern      *int     `json:"sliding_window_pattern"`
	LayerTypes                []string `json:"layer_types"`
	RopeLocalBaseFreq         *float64 `json:"rope_local_base_freq"`
	QueryPreAttnScalar        *float64 `json:"query_pre_attn_scalar"`
	FinalLogitSoftcapping     *float64 `json:"final_logit_softcapping"`
	AttnLogitSoftcapping      *float64 `json:"attn_logit_softcapping"`
	UseBidirectionalAttention bool     `json:"use_bidirectional_attention"`
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
	if len(j.Architectures) != 1 || (j.Architectures[0] != ArchLlama && j.Architectures[0] != ArchQwen3 && j.Architectures[0] != ArchGemma3) {
		return nil, fmt.Errorf("architectures is %q; want exactly one of [%q %q %q]", j.Architectures, ArchLlama, ArchQwen3, ArchGemma3)
	}
	isGemma := j.Architectures[0] == ArchGemma3
	// These options change the computation; refusing them beats silently
	// computing something else.
	if isGemma {
		// Gemma-3 names its activation hidden_activation.
		if j.HiddenActivation != nil && *j.HiddenActivation != "gelu_pytorch_tanh" {
			return nil, fmt.Errorf("hidden_activation is %q; only \"gelu_pytorch_tanh\" is supported", *j.HiddenActivation)
		}
		if j.UseBidirectionalAttention {
			return nil, fmt.Errorf("use_bidirectional_attention is true; only causal attention is supported")
		}
	} else if j.HiddenAct != nil && *j.HiddenAct != "silu" {
		return nil, fmt.Errorf("hidden_act is %q; only \"silu\" is supported", *j.HiddenAct)
	}
	if j.AttentionBias {
		return nil, fmt.Errorf("attention_bias is true; only bias-free projections are supported")
	}
	if j.MLPBias {
		return nil, fmt.Errorf("mlp_bias is true; only bias-free projections are supported")
	}
	if j.UseSlidingWindow && !isGemma {
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
	if isGemma {
		if err := c.parseGemma3(&j); err != nil {
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseGemma3 fills the Gemma-3 fields with the defaults of HuggingFace's
// Gemma3TextConfig where config.json leaves them out.
func (c *Config) parseGemma3(j *configJSON) error {
	g := &c.gemma3
	if j.RopeTheta == nil {
		c.RopeTheta = 1000000
	}
	g.SlidingWindow = 4096
	if j.SlidingWindow != nil {
		g.SlidingWindow = *j.SlidingWindow
	}
	g.RopeLocalBaseFreq = 10000
	if j.RopeLocalBaseFreq != nil {
		g.RopeLocalBaseFreq = *j.RopeLocalBaseFreq
	}
	g.QueryPreAttnScalar = 256
	if j.QueryPreAttnScalar != nil {
		g.QueryPreAttnScalar = *j.QueryPreAttnScalar
	}
	if j.FinalLogitSoftcapping != nil {
		g.FinalLogitSoftcapping = *j.FinalLogitSoftcapping
	}
	if j.AttnLogitSoftcapping != nil {
		g.AttnLogitSoftcapping = *j.AttnLogitSoftcapping
	}
	if j.LayerTypes != nil {
		g.LayerTypes = j.LayerTypes
		return nil
	}
	// Without layer_types, every pattern-th layer is global: layer i slides
	// unless (i+1) is a multiple of the pattern.
	pattern := 6
	if j.SlidingWindowPattern != nil {
		pattern = *j.SlidingWindowPattern
	}
	if pattern <= 0 {
		return fmt.Errorf("sliding_window_pattern is %d; want > 0", pattern)
	}
	g.LayerTypes = make([]string, c.NumHiddenLayers)
	for i := range g.LayerTypes {
		g.LayerTypes[i] = LayerSliding
		if (i+1)%pattern == 0 {
			g.LayerTypes[i] = LayerFull
		}
	}
	return nil
}

// LayerWindow returns layer l's attention window for kernels.AttnShape:
// sliding_window for a Gemma-3 sliding layer, 0 (every position) otherwise.
func (c *Config) LayerWindow(l int) int {
	if c.Arch == ArchGemma3 && c.LayerTypes[l] == LayerSliding {
		return c.SlidingWindow
	}
	return 0
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
	case "linear":
		// Positions divided by factor: every inverse frequency over factor.
		if j.Factor == nil {
			return nil, fmt.Errorf("rope_scaling.factor is missing; rope_type \"linear\" needs it")
		}
		return &RopeScaling{RopeType: typ, Factor: *j.Factor}, nil
	default:
		return nil, fmt.Errorf("rope_scaling.rope_type is %q; want \"llama3\", \"linear\" or \"default\"", typ)
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
	if c.Arch != ArchLlama && c.Arch != ArchQwen3 && c.Arch != ArchGemma3 {
		return fmt.Errorf("architectures is [%q]; want one of [%q %q %q]", c.Arch, ArchLlama, ArchQwen3, ArchGemma3)
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
	if c.Arch == ArchGemma3 {
		if err := c.validateGemma3(); err != nil {
			return err
		}
	}
	if rs := c.RopeScaling; rs != nil {
		if rs.RopeType != "llama3" && rs.RopeType != "linear" {
			return fmt.Errorf("rope_scaling.rope_type is %q; want \"llama3\", \"linear\" or \"default\"", rs.RopeType)
		}
		if !(rs.Factor > 0) {
			return fmt.Errorf("rope_scaling.factor is %v; want > 0", rs.Factor)
		}
		if rs.RopeType == "linear" {
			return nil
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

func (c *Config) validateGemma3() error {
	g := &c.gemma3
	if len(g.LayerTypes) != c.NumHiddenLayers {
		return fmt.Errorf("layer_types has %d entries for %d layers", len(g.LayerTypes), c.NumHiddenLayers)
	}
	for i, lt := range g.LayerTypes {
		if lt != LayerSliding && lt != LayerFull {
			return fmt.Errorf("layer_types[%d] is %q; want %q or %q", i, lt, LayerSliding, LayerFull)
		}
	}
	if g.SlidingWindow <= 0 {
		return fmt.Errorf("sliding_window is %d; want > 0", g.SlidingWindow)
	}
	if !(g.RopeLocalBaseFreq > 0) {
		return fmt.Errorf("rope_local_base_freq is %v; want > 0", g.RopeLocalBaseFreq)
	}
	if !(g.QueryPreAttnScalar > 0) {
		return fmt.Errorf("query_pre_attn_scalar is %v; want > 0", g.QueryPreAttnScalar)
	}
	if g.FinalLogitSoftcapping < 0 || g.AttnLogitSoftcapping < 0 {
		return fmt.Errorf("final_logit_softcapping (%v) and attn_logit_softcapping (%v) must be > 0 or null", g.FinalLogitSoftcapping, g.AttnLogitSoftcapping)
	}
	return nil
}

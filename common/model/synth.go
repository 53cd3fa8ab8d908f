package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"kvlab/common/tokenizer"
)

// SynthOptions describes a synthetic checkpoint: the architecture and sizes
// of a real one, with seeded random weights.
type SynthOptions struct {
	Arch         string // ArchLlama, ArchQwen3 or ArchGemma3
	Seed         int64  // same seed and options, same bytes on disk
	Vocab        int
	Hidden       int
	Intermediate int
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int
	DType        string // "f32", "bf16" or "f16": the dtype of every tensor on disk
	Tied         bool   // tie_word_embeddings: no lm_head.weight, logits use the embeddings

	RopeTheta    float64
	RopeScaling  *RopeScaling // nil for plain RoPE
	RMSNormEps   float64
	MaxPositions int   // max_position_embeddings
	BOS          int32 // bos_token_id
	EOS          int32 // eos_token_id
	Shards       int   // > 1 writes that many shards plus model.safetensors.index.json

	// Gemma-3 only.
	SlidingWindow        int      // sliding_window
	SlidingWindowPattern int      // sliding_window_pattern: every pattern-th layer is global
	LayerTypes           []string // layer_types; nil derives them from the pattern
	RopeLocalBase        float64  // rope_local_base_freq
	QueryPreAttnScalar   float64  // query_pre_attn_scalar
	FinalSoftcap         float64  // final_logit_softcapping; 0 writes null
	AttnSoftcap          float64  // attn_logit_softcapping; 0 writes null
}

// DefaultSynth returns the options of a small model shaped like the real
// small checkpoints of arch (ArchLlama, ArchQwen3 or ArchGemma3; "llama",
// "qwen3" and "gemma3" are accepted too): hidden 256, 4 layers, 4 query heads sharing 2 KV heads
// of 64 features, tied embeddings, float32. Llama gets Llama 3.2's RoPE
// (theta 500000, llama3 scaling by 32); Qwen3 gets theta 1000000.
func DefaultSynth(arch string) SynthOptions {
	switch arch {
	case "llama":
		arch = ArchLlama
	case "qwen3":
		arch = ArchQwen3
	case "gemma3":
		arch = ArchGemma3
	}
	if arch == ArchGemma3 {
		return defaultGemma3()
	}
	o := SynthOptions{
		Arch:         arch,
		Seed:         1,
		Vocab:        4096,
		Hidden:       256,
		Intermediate: 768,
		Layers:       4,
		Heads:        4,
		KVHeads:      2,
		HeadDim:      64,
		DType:        "f32",
		Tied:         true,
		BOS:          1,
		EOS:          2,
	}
	if arch == ArchQwen3 {
		o.RopeTheta = 1000000
		o.RMSNormEps = 1e-6
		o.MaxPositions = 40960
	} else {
		o.RopeTheta = 500000
		o.RMSNormEps = 1e-5
		o.MaxPositions = 131072
		o.RopeScaling = &RopeScaling{
			RopeType:                      "llama3",
			Factor:                        32,
			LowFreqFactor:                 1,
			HighFreqFactor:                4,
			OriginalMaxPositionEmbeddings: 8192,
		}
	}
	return o
}

// defaultGemma3 is DefaultSynth for Gemma-3: shaped like Gemma-3-1B at a
// small size (one KV head, head_dim 64 = query_pre_attn_scalar, five
// sliding layers of window 512 for each global one, RoPE theta 1000000 for
// global layers and 10000 for sliding ones, no soft-capping), with
// Gemma's token ids (bos 2, eos 1).
func defaultGemma3() SynthOptions {
	return SynthOptions{
		Arch:                 ArchGemma3,
		Seed:                 1,
		Vocab:                4096,
		Hidden:               256,
		Intermediate:         768,
		Layers:               6,
		Heads:                4,
		KVHeads:              1,
		HeadDim:              64,
		DType:                "f32",
		Tied:                 true,
		RopeTheta:            1000000,
		RMSNormEps:           1e-6,
		MaxPositions:         32768,
		BOS:                  2,
		EOS:                  1,
		SlidingWindow:        512,
		SlidingWindowPattern: 6,
		RopeLocalBase:        10000,
		QueryPreAttnScalar:   64,
	}
}

// embedStd is the standard deviation of synthetic token embeddings.
const embedStd = 0.02

// synthDTypes maps SynthOptions.DType to the safetensors dtype and the
// config.json torch_dtype.
var synthDTypes = map[string]struct{ disk, torch string }{
	"f32":  {DTypeF32, "float32"},
	"bf16": {DTypeBF16, "bfloat16"},
	"f16":  {DTypeF16, "float16"},
}

// Config returns the model configuration the options describe, validated.
func (o SynthOptions) Config() (*Config, error) {
	dt, ok := synthDTypes[o.DType]
	if !ok {
		return nil, fmt.Errorf("synthetic model: DType is %q; want \"f32\", \"bf16\" or \"f16\"", o.DType)
	}
	c := &Config{
		Arch:                  o.Arch,
		ModelType:             map[string]string{ArchLlama: "llama", ArchQwen3: "qwen3", ArchGemma3: "gemma3_text"}[o.Arch],
		VocabSize:             o.Vocab,
		HiddenSize:            o.Hidden,
		IntermediateSize:      o.Intermediate,
		NumHiddenLayers:       o.Layers,
		NumAttentionHeads:     o.Heads,
		NumKeyValueHeads:      o.KVHeads,
		HeadDim:               o.HeadDim,
		RMSNormEps:            o.RMSNormEps,
		RopeTheta:             o.RopeTheta,
		RopeScaling:           o.RopeScaling,
		MaxPositionEmbeddings: o.MaxPositions,
		TieWordEmbeddings:     o.Tied,
		TorchDType:            dt.torch,
		BOSTokenID:            o.BOS,
		EOSTokenIDs:           []int32{o.EOS},
	}
	if o.Arch == ArchGemma3 {
		c.gemma3 = gemma3{
			SlidingWindow:         o.SlidingWindow,
			LayerTypes:            o.LayerTypes,
			RopeLocalBaseFreq:     o.RopeLocalBase,
			QueryPreAttnScalar:    o.QueryPreAttnScalar,
			FinalLogitSoftcapping: o.FinalSoftcap,
			AttnLogitSoftcapping:  o.AttnSoftcap,
		}
		if c.LayerTypes == nil && o.SlidingWindowPattern > 0 {
			c.LayerTypes = make([]string, o.Layers)
			for i := range c.LayerTypes {
				c.LayerTypes[i] = LayerSliding
				if (i+1)%o.SlidingWindowPattern == 0 {
					c.LayerTypes[i] = LayerFull
				}
			}
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("synthetic model: %w", err)
	}
	return c, nil
}

// SynthTensors returns the tensors WriteSynthetic writes for o, in file
// order, with values already rounded to the on-disk dtype (so they are
// exactly what a reader gets back).
//
// Scales keep activations O(1) through the layers and make greedy decoding
// wander rather than repeat: projections N(0, 1/fan_in), so each sublayer
// roughly preserves the size of its input; norm weights 1 + N(0, 0.1²), away
// from 1 so a forward that skipped a norm weight would be caught; embeddings
// N(0, 0.02²), HuggingFace's initializer_range. The embeddings must be small:
// with tied embeddings the logits are the final hidden state dotted with
// every embedding, and if the input token's own embedding dominated the
// residual stream (as it does at std 1) its logit would win at every step
// and greedy decoding would repeat the prompt's last token forever.
func SynthTensors(o SynthOptions) ([]*HostTensor, error) {
	c, err := o.Config()
	if err != nil {
		return nil, err
	}
	disk := synthDTypes[o.DType].disk
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0))
	var out []*HostTensor
	for _, s := range weightSpecs(c) {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			var v float64
			switch s.Kind {
			case kindEmbed:
				v = embedStd * rng.NormFloat64()
			case kindLinear:
				v = rng.NormFloat64() / math.Sqrt(float64(s.Shape[1]))
			case kindNorm:
				v = 1 + 0.1*rng.NormFloat64()
			case kindNormOffset:
				v = 0.1 * rng.NormFloat64()
			}
			data[i] = RoundToDType(float32(v), disk)
		}
		out = append(out, &HostTensor{Name: s.Name, DType: disk, Shape: s.Shape, Data: data})
	}
	return out, nil
}

// WriteSynthetic writes config.json and the weights of a synthetic model
// into dir (created if needed): model.safetensors, or with Shards > 1 the
// shards and model.safetensors.index.json. When the vocabulary has room
// for it, it also writes a synthetic tokenizer of the same size: Gemma-3
// gets a Gemma-style SentencePiece BPE with byte fallback
// (tokenizer.WriteSyntheticGemma, from tokenizer.MinSyntheticGemmaVocab
// ids), the others a Llama-3-style byte-level BPE (tokenizer.WriteSynthetic,
// from tokenizer.MinSyntheticVocab ids).
func WriteSynthetic(dir string, o SynthOptions) error {
	c, err := o.Config()
	if err != nil {
		return err
	}
	tensors, err := SynthTensors(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(hfConfigJSON(c), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), append(cfg, '\n'), 0o644); err != nil {
		return err
	}
	// A leftover single file would shadow new shards and vice versa.
	stale := IndexFile
	if o.Shards > 1 {
		stale = SingleFile
	}
	if err := os.Remove(filepath.Join(dir, stale)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	meta := map[string]string{"format": "pt"}
	if o.Shards <= 1 {
		err = WriteSafetensors(filepath.Join(dir, SingleFile), tensors, meta)
	} else {
		err = writeShards(dir, tensors, o.Shards, meta)
	}
	if err != nil {
		return err
	}
	// The tokenizer files let a server take text; tests with vocabularies
	// too small for the special and byte tokens do without them.
	if o.Arch == ArchGemma3 {
		if o.Vocab >= tokenizer.MinSyntheticGemmaVocab {
			return tokenizer.WriteSyntheticGemma(dir, o.Vocab, o.BOS, o.EOS)
		}
		return nil
	}
	if o.Vocab >= tokenizer.MinSyntheticVocab {
		return tokenizer.WriteSynthetic(dir, o.Vocab, o.BOS, o.EOS)
	}
	return nil
}

// writeShards splits tensors into n consecutive groups, one file each, and
// writes the index mapping every tensor to its file.
func writeShards(dir string, tensors []*HostTensor, n int, meta map[string]string) error {
	n = min(n, len(tensors))
	weightMap := map[string]string{}
	var total int64
	for i := range n {
		part := tensors[i*len(tensors)/n : (i+1)*len(tensors)/n]
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		for _, t := range part {
			weightMap[t.Name] = file
			es, _ := dtypeSize(t.DType)
			total += int64(len(t.Data) * es)
		}
		if err := WriteSafetensors(filepath.Join(dir, file), part, meta); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{
		"metadata":   map[string]int64{"total_size": total},
		"weight_map": weightMap,
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, IndexFile), append(idx, '\n'), 0o644)
}

// hfConfigJSON returns config.json's contents with the keys and values a
// HuggingFace checkpoint of the same architecture carries, so tools that
// read real checkpoints read these too.
func hfConfigJSON(c *Config) map[string]any {
	var scaling any // JSON null when absent, as in real files
	if rs := c.RopeScaling; rs != nil && rs.RopeType == "linear" {
		scaling = map[string]any{"rope_type": rs.RopeType, "factor": rs.Factor}
	} else if rs != nil {
		scaling = map[string]any{
			"rope_type":                        rs.RopeType,
			"factor":                           rs.Factor,
			"low_freq_factor":                  rs.LowFreqFactor,
			"high_freq_factor":                 rs.HighFreqFactor,
			"original_max_position_embeddings": rs.OriginalMaxPositionEmbeddings,
		}
	}
	m := map[string]any{
		"architectures":           []string{c.Arch},
		"model_type":              c.ModelType,
		"vocab_size":              c.VocabSize,
		"hidden_size":             c.HiddenSize,
		"intermediate_size":       c.IntermediateSize,
		"num_hidden_layers":       c.NumHiddenLayers,
		"num_attention_heads":     c.NumAttentionHeads,
		"num_key_value_heads":     c.NumKeyValueHeads,
		"head_dim":                c.HeadDim,
		"hidden_act":              "silu",
		"rms_norm_eps":            c.RMSNormEps,
		"rope_theta":              c.RopeTheta,
		"rope_scaling":            scaling,
		"max_position_embeddings": c.MaxPositionEmbeddings,
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"torch_dtype":             c.TorchDType,
		"bos_token_id":            c.BOSTokenID,
		"eos_token_id":            c.EOSTokenIDs[0],
		"attention_bias":          false,
		"attention_dropout":       0.0,
		"initializer_range":       0.02,
		"use_cache":               true,
	}
	if c.Arch == ArchGemma3 {
		return gemma3ConfigJSON(c, m)
	}
	if c.Arch == ArchQwen3 {
		m["use_sliding_window"] = false
		m["sliding_window"] = nil
		m["max_window_layers"] = c.NumHiddenLayers
	} else {
		m["mlp_bias"] = false
		m["pretraining_tp"] = 1
	}
	return m
}

// gemma3ConfigJSON turns the common keys m into a Gemma3TextConfig's
// config.json: hidden_activation instead of hidden_act, the sliding-window
// and soft-capping keys, and pad_token_id 0.
func gemma3ConfigJSON(c *Config, m map[string]any) map[string]any {
	delete(m, "hidden_act")
	nullIfZero := func(v float64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	pattern := 0 // sliding_window_pattern: the period of layer_types, if it has one
	for p := 1; p <= len(c.LayerTypes) && pattern == 0; p++ {
		ok := true
		for i, lt := range c.LayerTypes {
			if (lt == LayerFull) != ((i+1)%p == 0) {
				ok = false
				break
			}
		}
		if ok {
			pattern = p
		}
	}
	m["hidden_activation"] = "gelu_pytorch_tanh"
	m["rope_local_base_freq"] = c.RopeLocalBaseFreq
	m["query_pre_attn_scalar"] = c.QueryPreAttnScalar
	m["sliding_window"] = c.SlidingWindow
	m["layer_types"] = c.LayerTypes
	if pattern > 0 {
		m["sliding_window_pattern"] = pattern
	}
	m["final_logit_softcapping"] = nullIfZero(c.FinalLogitSoftcapping)
	m["attn_logit_softcapping"] = nullIfZero(c.AttnLogitSoftcapping)
	m["pad_token_id"] = 0
	m["cache_implementation"] = "hybrid"
	return m
}

package model

import "fmt"

// weightSpec is one tensor a checkpoint must hold: its HuggingFace name and
// shape (out × in for a Linear weight, [n] for a norm weight).
type weightSpec struct {
	Name  string
	Shape []int
	Kind  weightKind
}

// weightKind tells the synthetic writer how to initialise a tensor.
type weightKind int

const (
	kindEmbed      weightKind = iota // token embeddings, std 1
	kindLinear                       // projections, std 1/sqrt(fan_in)
	kindNorm                         // RMSNorm weights, near 1
	kindNormOffset                   // Gemma's RMSNorm weights, near 0: the norm multiplies by 1 + weight
)

// Tensor names, as HuggingFace's Llama, Qwen3 and Gemma-3 implementations
// name them.
const (
	nameEmbed  = "model.embed_tokens.weight"
	nameNorm   = "model.norm.weight"
	nameLMHead = "lm_head.weight"
)

// layerName returns the name of a per-layer tensor, e.g.
// layerName(3, "self_attn.q_proj") = "model.layers.3.self_attn.q_proj.weight".
func layerName(l int, part string) string {
	return fmt.Sprintf("model.layers.%d.%s.weight", l, part)
}

// weightSpecs lists the tensors c needs, in the order HuggingFace's modules
// declare them. Load reads exactly these; WriteSynthetic writes exactly
// these.
func weightSpecs(c *Config) []weightSpec {
	h, q, kv, inter := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	specs := []weightSpec{{nameEmbed, []int{c.VocabSize, h}, kindEmbed}}
	if c.Arch == ArchGemma3 {
		return gemma3Specs(c, specs)
	}
	for l := range c.NumHiddenLayers {
		specs = append(specs,
			weightSpec{layerName(l, "input_layernorm"), []int{h}, kindNorm},
			weightSpec{layerName(l, "self_attn.q_proj"), []int{q, h}, kindLinear},
			weightSpec{layerName(l, "self_attn.k_proj"), []int{kv, h}, kindLinear},
			weightSpec{layerName(l, "self_attn.v_proj"), []int{kv, h}, kindLinear},
			weightSpec{layerName(l, "self_attn.o_proj"), []int{h, q}, kindLinear},
		)
		if c.Arch == ArchQwen3 {
			specs = append(specs,
				weightSpec{layerName(l, "self_attn.q_norm"), []int{c.HeadDim}, kindNorm},
				weightSpec{layerName(l, "self_attn.k_norm"), []int{c.HeadDim}, kindNorm},
			)
		}
		specs = append(specs,
			weightSpec{layerName(l, "post_attention_layernorm"), []int{h}, kindNorm},
			weightSpec{layerName(l, "mlp.gate_proj"), []int{inter, h}, kindLinear},
			weightSpec{layerName(l, "mlp.up_proj"), []int{inter, h}, kindLinear},
			weightSpec{layerName(l, "mlp.down_proj"), []int{h, inter}, kindLinear},
		)
	}
	specs = append(specs, weightSpec{nameNorm, []int{h}, kindNorm})
	if !c.TieWordEmbeddings {
		specs = append(specs, weightSpec{nameLMHead, []int{c.VocabSize, h}, kindLinear})
	}
	return specs
}

// gemma3Specs appends Gemma-3's tensors to specs (which holds the
// embeddings): per layer, the attention with its per-head q and k norms, the
// MLP, and four norms (input, post-attention, pre-feedforward,
// post-feedforward), as Gemma3DecoderLayer declares them; then the final
// norm. Gemma-3 ties its embeddings; an lm_head.weight is read only when
// tie_word_embeddings is false.
func gemma3Specs(c *Config, specs []weightSpec) []weightSpec {
	h, q, kv, inter, hd := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.HeadDim
	for l := range c.NumHiddenLayers {
		specs = append(specs,
			weightSpec{layerName(l, "self_attn.q_proj"), []int{q, h}, kindLinear},
			weightSpec{layerName(l, "self_attn.k_proj"), []int{kv, h}, kindLinear},
			weightSpec{layerName(l, "self_attn.v_proj"), []int{kv, h}, kindLinear},
			weightSpec{layerName(l, "self_attn.o_proj"), []int{h, q}, kindLinear},
			weightSpec{layerName(l, "self_attn.q_norm"), []int{hd}, kindNormOffset},
			weightSpec{layerName(l, "self_attn.k_norm"), []int{hd}, kindNormOffset},
			weightSpec{layerName(l, "mlp.gate_proj"), []int{inter, h}, kindLinear},
			weightSpec{layerName(l, "mlp.up_proj"), []int{inter, h}, kindLinear},
			weightSpec{layerName(l, "mlp.down_proj"), []int{h, inter}, kindLinear},
			weightSpec{layerName(l, "input_layernorm"), []int{h}, kindNormOffset},
			weightSpec{layerName(l, "post_attention_layernorm"), []int{h}, kindNormOffset},
			weightSpec{layerName(l, "pre_feedforward_layernorm"), []int{h}, kindNormOffset},
			weightSpec{layerName(l, "post_feedforward_layernorm"), []int{h}, kindNormOffset},
		)
	}
	specs = append(specs, weightSpec{nameNorm, []int{h}, kindNormOffset})
	if !c.TieWordEmbeddings {
		specs = append(specs, weightSpec{nameLMHead, []int{c.VocabSize, h}, kindLinear})
	}
	return specs
}

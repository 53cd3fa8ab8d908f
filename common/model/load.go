package model

import (
	"fmt"
	"math"

	"kvlab/kernels"
)

// Model is a loaded checkpoint on a backend. It is not safe for concurrent
// use: Forward reuses one set of scratch tensors.
type Model struct {
	Config Config

	be      kernels.Backend
	invFreq []float32 // RoPE of the global layers (every layer but Gemma-3's sliding ones)
	// Gemma-3 only.
	gemma      kernels.GemmaOps
	invLocal   []float32 // RoPE of the sliding layers
	embedScale float32   // sqrt(hidden_size) in the embeddings' dtype
	embedRound func(float32) float32
	embed      kernels.Tensor // vocab × hidden
	layers     []layer
	norm       kernels.Tensor // 1 × hidden
	lmHead     kernels.Tensor // vocab × hidden; the embeddings when tied
	weights    map[string]kernels.Tensor
	scr        scratch
}

// layer holds one decoder layer's weights. Norm weights are 1×n tensors;
// projections keep HuggingFace's out×in layout, which MatMulT expects.
type layer struct {
	inNorm, postNorm  kernels.Tensor
	wq, wk, wv, wo    kernels.Tensor
	qNorm, kNorm      kernels.Tensor // Qwen3 and Gemma-3
	wGate, wUp, wDown kernels.Tensor
	// Gemma-3 only: the norms around the MLP. Gemma's postNorm normalises the
	// attention output; Llama's and Qwen3's normalises the MLP's input.
	preFFNorm, postFFNorm kernels.Tensor
	window                int       // attention window; 0 = every position
	invFreq               []float32 // this layer's RoPE frequencies
}

// bf16Holder is a backend that can hold a weight as bfloat16 and widen it
// as it multiplies (the CPU backend). A bf16 checkpoint's 2-D weights (the
// projections and the embeddings, which only MatMulT and Embed read) are
// then kept as bf16: half the bytes streamed per decoded token, and the same
// results, since widening bf16 to float32 is exact. Other backends get the
// widened float32 values.
type bf16Holder interface {
	FromHostBF16(rows, cols int, data []float32) kernels.Tensor
}

// Load reads the checkpoint in dir (config.json plus safetensors weights)
// and uploads its weights to be. Every tensor the architecture needs must be
// present with the right shape; extra tensors are ignored.
func Load(dir string, be kernels.Backend) (*Model, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()

	m := &Model{Config: *cfg, be: be, invFreq: cfg.InvFreq(), weights: map[string]kernels.Tensor{}}
	gemma := cfg.Arch == ArchGemma3
	if gemma {
		g, ok := be.(kernels.GemmaOps)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend lacks the operations Gemma-3 needs (kernels.GemmaOps)", cfg.Arch, be.Name())
		}
		m.gemma, m.invLocal = g, cfg.InvFreqLocal()
	}
	// One tensor at a time: the float32 host copy is dropped once uploaded,
	// so peak host memory is the largest tensor, not the model.
	for _, s := range weightSpecs(cfg) {
		ht, err := ck.Read(s.Name, s.Shape...)
		if err != nil {
			m.Close()
			return nil, err
		}
		if s.Kind == kindNormOffset {
			// Gemma's RMSNorm multiplies by (1 + weight), computed in
			// float32; adding the 1 once here lets the usual RMSNorm run.
			for i, w := range ht.Data {
				ht.Data[i] = 1 + w
			}
		}
		if gemma && s.Name == nameEmbed {
			// HuggingFace scales the embeddings by sqrt(hidden_size), a
			// float32 rounded to the embeddings' dtype, and multiplies in
			// that dtype.
			dt := ht.DType
			m.embedScale = RoundToDType(float32(math.Sqrt(float64(cfg.HiddenSize))), dt)
			if dt != DTypeF32 {
				m.embedRound = func(f float32) float32 { return RoundToDType(f, dt) }
			}
		}
		rows, cols := 1, s.Shape[0]
		if len(s.Shape) == 2 {
			rows, cols = s.Shape[0], s.Shape[1]
		}
		if hb, ok := be.(bf16Holder); ok && ht.DType == DTypeBF16 && len(s.Shape) == 2 {
			m.weights[s.Name] = hb.FromHostBF16(rows, cols, ht.Data)
		} else {
			m.weights[s.Name] = be.FromHost(rows, cols, ht.Data)
		}
	}

	w := m.weights
	m.embed, m.norm = w[nameEmbed], w[nameNorm]
	m.lmHead = w[nameLMHead]
	if cfg.TieWordEmbeddings {
		m.lmHead = m.embed
	}
	m.layers = make([]layer, cfg.NumHiddenLayers)
	for l := range m.layers {
		m.layers[l] = layer{
			inNorm:   w[layerName(l, "input_layernorm")],
			postNorm: w[layerName(l, "post_attention_layernorm")],
			wq:       w[layerName(l, "self_attn.q_proj")],
			wk:       w[layerName(l, "self_attn.k_proj")],
			wv:       w[layerName(l, "self_attn.v_proj")],
			wo:       w[layerName(l, "self_attn.o_proj")],
			qNorm:    w[layerName(l, "self_attn.q_norm")],
			kNorm:    w[layerName(l, "self_attn.k_norm")],
			wGate:    w[layerName(l, "mlp.gate_proj")],
			wUp:      w[layerName(l, "mlp.up_proj")],
			wDown:    w[layerName(l, "mlp.down_proj")],
			window:   cfg.LayerWindow(l),
			invFreq:  m.invFreq,
		}
		if gemma {
			m.layers[l].preFFNorm = w[layerName(l, "pre_feedforward_layernorm")]
			m.layers[l].postFFNorm = w[layerName(l, "post_feedforward_layernorm")]
			if cfg.LayerTypes[l] == LayerSliding {
				m.layers[l].invFreq = m.invLocal
			}
		}
	}
	return m, nil
}

// Backend returns the backend the model's weights live on.
func (m *Model) Backend() kernels.Backend { return m.be }

// Close frees the weights and scratch tensors. The model is unusable
// afterwards.
func (m *Model) Close() {
	for name, t := range m.weights {
		m.be.Free(t)
		delete(m.weights, name)
	}
	m.scr.free(m.be)
}

// CheckTokens reports the first token id outside [0, vocab_size). The
// forward does not check (an out-of-range id is a bug by the time it gets
// there); the engine calls this on user input.
func (m *Model) CheckTokens(ids []int32) error {
	for i, id := range ids {
		if id < 0 || int(id) >= m.Config.VocabSize {
			return fmt.Errorf("token %d (at index %d) is outside the vocabulary [0, %d)", id, i, m.Config.VocabSize)
		}
	}
	return nil
}

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

	// ck holds the files some weights are views of (a mapped checkpoint on
	// the CPU backend), nil when every weight was copied; Close unmaps them
	// once the weights are freed.
	ck     *Checkpoint
	mapped int64 // bytes of the files in ck
	locked bool  // ck's files are locked in memory (LoadOptions.Mlock)
	closed bool
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
// as it multiplies (the CUDA backend; the CPU backend does too, and takes
// the bf16 bits themselves as a hostBorrower). A bf16 checkpoint's 2-D
// weights (the projections and the embeddings, which only MatMulT and Embed
// read) are then kept as bf16: half the bytes streamed per decoded token,
// and the same results, since widening bf16 to float32 is exact. Other
// backends get the widened float32 values.
type bf16Holder interface {
	FromHostBF16(rows, cols int, data []float32) kernels.Tensor
}

// LoadOptions chooses how Load brings the weights into memory.
type LoadOptions struct {
	// NoMmap reads every tensor into memory instead of mapping the
	// checkpoint's files. Where this OS cannot map files, Load always
	// reads.
	NoMmap bool
	// Mlock locks the mapped weights the model keeps in RAM, faulting them
	// all in, so that no request waits for a page to come back from disk.
	// Load fails with a *LockError when the OS refuses (RLIMIT_MEMLOCK).
	// It locks nothing where no weight stays mapped: a device backend,
	// which copies every weight, or a checkpoint whose tensors all had to
	// be converted.
	Mlock bool
}

// Load reads the checkpoint in dir (config.json plus safetensors weights)
// onto be, mapping its files: LoadWith with the default options.
func Load(dir string, be kernels.Backend) (*Model, error) {
	return LoadWith(dir, be, LoadOptions{})
}

// LoadWith reads the checkpoint in dir (config.json plus safetensors
// weights) and puts its weights on be. Every tensor the architecture needs
// must be present with the right shape; extra tensors are ignored.
//
// The files are mapped read-only unless o.NoMmap is set. On the CPU backend
// a weight then is the file's bytes themselves wherever the backend
// computes with the dtype on disk (float32, and bf16 matrices) and the data
// is aligned; only what must be converted is (f16 weights, bf16 norms,
// Gemma's norm weights, misaligned data), into the one buffer the weight
// keeps. The mapping lives until Close. Other backends copy every weight to
// their memory, reading it from the mapping, which Load releases before it
// returns.
func LoadWith(dir string, be kernels.Backend, o LoadOptions) (*Model, error) {
	if o.Mlock && o.NoMmap {
		return nil, fmt.Errorf("locking the weights in memory needs them mapped, and NoMmap reads them instead")
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := openCheckpoint(dir, !o.NoMmap)
	if err != nil {
		return nil, err
	}

	m := &Model{Config: *cfg, be: be, invFreq: cfg.InvFreq(), weights: map[string]kernels.Tensor{}}
	fail := func(err error) (*Model, error) {
		m.Close() // frees the weights before their memory goes
		ck.Close()
		return nil, err
	}
	gemma := cfg.Arch == ArchGemma3
	if gemma {
		g, ok := be.(kernels.GemmaOps)
		if !ok {
			return fail(fmt.Errorf("%s: the %s backend lacks the operations Gemma-3 needs (kernels.GemmaOps)", cfg.Arch, be.Name()))
		}
		m.gemma, m.invLocal = g, cfg.InvFreqLocal()
	}
	keep := map[*SafetensorsFile]bool{} // files some weight is a view of
	for _, s := range weightSpecs(cfg) {
		st, ti, err := ck.lookup(s.Name, s.Shape...)
		if err != nil {
			return fail(err)
		}
		if gemma && s.Name == nameEmbed {
			// HuggingFace scales the embeddings by sqrt(hidden_size), a
			// float32 rounded to the embeddings' dtype, and multiplies in
			// that dtype.
			dt := ti.DType
			m.embedScale = RoundToDType(float32(math.Sqrt(float64(cfg.HiddenSize))), dt)
			if dt != DTypeF32 {
				m.embedRound = func(f float32) float32 { return RoundToDType(f, dt) }
			}
		}
		t, view, err := loadWeight(be, st, ti, s)
		if err != nil {
			return fail(err)
		}
		m.weights[s.Name] = t
		if view {
			keep[st] = true
		}
	}
	// Files no weight is a view of are not needed any more: with a device
	// backend, all of them.
	if err := ck.keepOnly(keep); err != nil {
		return fail(err)
	}
	if len(keep) > 0 {
		m.ck = ck
		for st := range keep {
			m.mapped += int64(len(st.mm))
		}
		if o.Mlock {
			for st := range keep {
				if err := lockPages(st.mm); err != nil {
					return fail(err)
				}
			}
			m.locked = true
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

// loadWeight puts tensor ti of st, spec s, on be. view reports that the
// tensor is a view of st's mapping, which must then outlive it. A host copy
// made for another backend is dropped once uploaded, so host memory peaks
// at one tensor, not the model.
func loadWeight(be kernels.Backend, st *SafetensorsFile, ti TensorInfo, s weightSpec) (t kernels.Tensor, view bool, err error) {
	rows, cols := 1, s.Shape[0]
	if len(s.Shape) == 2 {
		rows, cols = s.Shape[0], s.Shape[1]
	}
	hb, borrows := be.(hostBorrower)
	switch {
	case borrows && ti.DType == DTypeBF16 && len(s.Shape) == 2:
		// The projections and the embeddings, which MatMulT and Embed
		// widen as they read them.
		bits, view, err := elements[uint16](st, ti)
		if err != nil {
			return nil, false, err
		}
		return hb.WrapBF16(rows, cols, bits), view, nil
	case borrows && ti.DType == DTypeF32 && s.Kind != kindNormOffset:
		data, view, err := elements[float32](st, ti)
		if err != nil {
			return nil, false, err
		}
		return hb.WrapHost(rows, cols, data), view, nil
	}
	ht, err := st.Read(ti.Name)
	if err != nil {
		return nil, false, err
	}
	if s.Kind == kindNormOffset {
		// Gemma's RMSNorm multiplies by (1 + weight), computed in float32;
		// adding the 1 once here lets the usual RMSNorm run.
		for i, w := range ht.Data {
			ht.Data[i] = 1 + w
		}
	}
	switch hh, ok := be.(bf16Holder); {
	case borrows:
		// ht.Data is this tensor's own new buffer: no need to copy it.
		return hb.WrapHost(rows, cols, ht.Data), false, nil
	case ok && ht.DType == DTypeBF16 && len(s.Shape) == 2:
		return hh.FromHostBF16(rows, cols, ht.Data), false, nil
	default:
		return be.FromHost(rows, cols, ht.Data), false, nil
	}
}

// Backend returns the backend the model's weights live on.
func (m *Model) Backend() kernels.Backend { return m.be }

// MappedBytes returns the size of the checkpoint files the model's weights
// are views of, which stay mapped until Close: 0 when every weight was
// copied (read with NoMmap, or put on a device). Only the pages the
// forward has touched are resident.
func (m *Model) MappedBytes() int64 { return m.mapped }

// Locked reports whether the mapped weights are locked in memory
// (LoadOptions.Mlock).
func (m *Model) Locked() bool { return m.locked }

// Close frees the weights and scratch tensors, then unmaps the files the
// weights were views of. The model is unusable afterwards: Forward panics
// rather than read unmapped memory. Closing twice is harmless.
func (m *Model) Close() {
	for name, t := range m.weights {
		m.be.Free(t)
		delete(m.weights, name)
	}
	m.scr.free(m.be)
	m.embed, m.norm, m.lmHead, m.layers = nil, nil, nil, nil
	if m.ck != nil {
		m.ck.Close()
		m.ck = nil
	}
	m.mapped, m.locked, m.closed = 0, false, true
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

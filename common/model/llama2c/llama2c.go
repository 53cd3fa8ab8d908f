// Package llama2c writes a Llama checkpoint in the legacy format of
// llama2.c's run.c (Andrej Karpathy's single-file C inference program), so
// that the same weights can be run by both engines and their decode speeds
// compared.
//
// The format is a header of seven little-endian int32 values (dim,
// hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len) followed
// by float32 tensors, each stored whole for all layers before the next:
// token embeddings, the attention RMSNorm weights, wq, wk, wv, wo, the FFN
// RMSNorm weights, w1 (gate), w2 (down), w3 (up), the final RMSNorm weight,
// two seq_len × head_dim/2 tables that run.c skips (the RoPE frequencies
// of older versions; written as zeros), and the classifier when it is not
// the embedding table. A negative vocab_size says the classifier is
// separate. Matrices are row-major [out, in], as in HuggingFace.
//
// run.c hard-codes part of the architecture: RMSNorm epsilon 1e-5, RoPE
// with theta 10000 and no scaling, head_dim = dim / n_heads. Export refuses
// models that differ. It also rotates adjacent features (2i with 2i+1)
// where HuggingFace's Llama rotates feature i with i+head_dim/2, so the
// rows of each head of wq and wk are reordered (gguf.PermuteRoPE): the two
// programs then compute the same function.
package llama2c

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"kvlab/common/model"
	"kvlab/common/model/gguf"
)

// HeaderSize is the size in bytes of the header.
const HeaderSize = 7 * 4

// Header is the checkpoint's header, with vocab_size's sign taken apart.
type Header struct {
	Dim, HiddenDim, Layers, Heads, KVHeads, Vocab, SeqLen int
	Shared                                                bool // the classifier is the embedding table
}

// HeadDim is dim / n_heads, as run.c computes it.
func (h Header) HeadDim() int { return h.Dim / h.Heads }

// Tensor is one stored array: its name in run.c and where its float32
// values lie in the file.
type Tensor struct {
	Name   string
	Offset int64 // bytes from the start of the file
	Len    int64 // float32 values
}

// Layout returns the tensors of a checkpoint with header h, in file order,
// as run.c maps them; "freq_cis" is the skipped space.
func (h Header) Layout() []Tensor {
	d, hd, l := int64(h.Dim), int64(h.HiddenDim), int64(h.Layers)
	kv := int64(h.KVHeads * h.HeadDim())
	q := int64(h.Heads * h.HeadDim())
	sizes := []struct {
		name string
		n    int64
	}{
		{"token_embedding_table", int64(h.Vocab) * d},
		{"rms_att_weight", l * d},
		{"wq", l * q * d},
		{"wk", l * kv * d},
		{"wv", l * kv * d},
		{"wo", l * d * q},
		{"rms_ffn_weight", l * d},
		{"w1", l * hd * d},
		{"w2", l * d * hd},
		{"w3", l * hd * d},
		{"rms_final_weight", d},
		{"freq_cis", int64(h.SeqLen) * int64(h.HeadDim())},
	}
	if !h.Shared {
		sizes = append(sizes, struct {
			name string
			n    int64
		}{"wcls", int64(h.Vocab) * d})
	}
	out := make([]Tensor, len(sizes))
	off := int64(HeaderSize)
	for i, s := range sizes {
		out[i] = Tensor{Name: s.name, Offset: off, Len: s.n}
		off += 4 * s.n
	}
	return out
}

// Size is the size in bytes of a checkpoint with header h.
func (h Header) Size() int64 {
	t := h.Layout()
	last := t[len(t)-1]
	return last.Offset + 4*last.Len
}

// ReadHeader reads the header at the start of r.
func ReadHeader(r io.Reader) (Header, error) {
	var v [7]int32
	if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
		return Header{}, fmt.Errorf("llama2c: header: %w", err)
	}
	h := Header{Dim: int(v[0]), HiddenDim: int(v[1]), Layers: int(v[2]), Heads: int(v[3]),
		KVHeads: int(v[4]), Vocab: int(v[5]), SeqLen: int(v[6]), Shared: v[5] > 0}
	if h.Vocab < 0 {
		h.Vocab = -h.Vocab
	}
	if h.Dim <= 0 || h.HiddenDim <= 0 || h.Layers <= 0 || h.Heads <= 0 || h.KVHeads <= 0 ||
		h.Vocab == 0 || h.SeqLen <= 0 || h.Dim%h.Heads != 0 || h.Heads%h.KVHeads != 0 {
		return h, fmt.Errorf("llama2c: header %v does not describe a model", v)
	}
	return h, nil
}

// HeaderOf returns the header of a checkpoint of cfg with a KV cache of
// seqLen positions, or why run.c cannot compute that model.
func HeaderOf(cfg *model.Config, seqLen int) (Header, error) {
	h := Header{Dim: cfg.HiddenSize, HiddenDim: cfg.IntermediateSize, Layers: cfg.NumHiddenLayers,
		Heads: cfg.NumAttentionHeads, KVHeads: cfg.NumKeyValueHeads, Vocab: cfg.VocabSize,
		SeqLen: seqLen, Shared: cfg.TieWordEmbeddings}
	switch {
	case cfg.Arch != model.ArchLlama:
		return h, fmt.Errorf("llama2c: run.c computes Llama; this model is %s", cfg.Arch)
	case cfg.HeadDim*cfg.NumAttentionHeads != cfg.HiddenSize:
		return h, fmt.Errorf("llama2c: run.c needs head_dim × heads = hidden (%d × %d ≠ %d)", cfg.HeadDim, cfg.NumAttentionHeads, cfg.HiddenSize)
	case cfg.RopeTheta != 10000 || cfg.RopeScaling != nil:
		return h, fmt.Errorf("llama2c: run.c's RoPE has theta 10000 and no scaling; this model has theta %g, scaling %v", cfg.RopeTheta, cfg.RopeScaling != nil)
	case float32(cfg.RMSNormEps) != 1e-5:
		return h, fmt.Errorf("llama2c: run.c's RMSNorm epsilon is 1e-5; this model's is %g", cfg.RMSNormEps)
	case seqLen < 1:
		return h, fmt.Errorf("llama2c: seq_len %d; want ≥ 1", seqLen)
	}
	return h, nil
}

// Export writes the checkpoint in dir (config.json and safetensors) to w
// in run.c's format, with a KV cache of seqLen positions (run.c generates
// at most seqLen tokens). Weights of any dtype are widened to float32,
// which is exact. It returns the header written.
func Export(dir string, w io.Writer, seqLen int) (Header, error) {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return Header{}, err
	}
	h, err := HeaderOf(cfg, seqLen)
	if err != nil {
		return h, err
	}
	ck, err := model.OpenCheckpoint(dir)
	if err != nil {
		return h, err
	}
	defer ck.Close()

	vocab := int32(h.Vocab)
	if !h.Shared {
		vocab = -vocab
	}
	hdr := []int32{int32(h.Dim), int32(h.HiddenDim), int32(h.Layers), int32(h.Heads), int32(h.KVHeads), vocab, int32(h.SeqLen)}
	if err := binary.Write(w, binary.LittleEndian, hdr); err != nil {
		return h, err
	}

	// put writes one HuggingFace tensor of shape, its rows reordered for
	// run.c's RoPE when heads > 0.
	put := func(name string, heads int, shape ...int) error {
		t, err := ck.Read(name, shape...)
		if err != nil {
			return err
		}
		data := t.Data
		if heads > 0 {
			data = gguf.PermuteRoPE(data, heads, shape[0]/heads, shape[1])
		}
		return writeF32(w, data)
	}
	layer := func(l int, part string) string { return "model.layers." + strconv.Itoa(l) + "." + part + ".weight" }
	d, q, kv, hd := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	steps := []struct {
		part  string
		heads int
		shape []int
	}{
		{"input_layernorm", 0, []int{d}},
		{"self_attn.q_proj", cfg.NumAttentionHeads, []int{q, d}},
		{"self_attn.k_proj", cfg.NumKeyValueHeads, []int{kv, d}},
		{"self_attn.v_proj", 0, []int{kv, d}},
		{"self_attn.o_proj", 0, []int{d, q}},
		{"post_attention_layernorm", 0, []int{d}},
		{"mlp.gate_proj", 0, []int{hd, d}},
		{"mlp.down_proj", 0, []int{d, hd}},
		{"mlp.up_proj", 0, []int{hd, d}},
	}
	if err := put("model.embed_tokens.weight", 0, h.Vocab, d); err != nil {
		return h, err
	}
	for _, s := range steps {
		for l := range h.Layers {
			if err := put(layer(l, s.part), s.heads, s.shape...); err != nil {
				return h, err
			}
		}
	}
	if err := put("model.norm.weight", 0, d); err != nil {
		return h, err
	}
	if err := writeF32(w, make([]float32, h.SeqLen*h.HeadDim())); err != nil {
		return h, err
	}
	if !h.Shared {
		if err := put("lm_head.weight", 0, h.Vocab, d); err != nil {
			return h, err
		}
	}
	return h, nil
}

// ExportFile is Export to the file at path (through a temporary file in
// the same directory, renamed once complete).
func ExportFile(dir, path string, seqLen int) (Header, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return Header{}, err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	h, err := Export(dir, tmp, seqLen)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return h, err
	}
	return h, os.Rename(tmp.Name(), path)
}

// writeF32 writes xs little-endian, a chunk at a time.
func writeF32(w io.Writer, xs []float32) error {
	buf := make([]byte, 0, 4*min(len(xs), 1<<16))
	for len(xs) > 0 {
		n := min(len(xs), 1<<16)
		buf = buf[:0]
		for _, x := range xs[:n] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		xs = xs[n:]
	}
	return nil
}

// WriteIDTokenizer writes a tokenizer.bin for run.c (its -z flag) whose
// piece for token i is " i": run.c then prints the ids it generates,
// separated by spaces, instead of text. The format is max_token_length
// (int32), then per token its score (float32), its length (int32) and its
// bytes.
func WriteIDTokenizer(w io.Writer, vocab int) error {
	maxLen := len(" " + strconv.Itoa(vocab-1))
	if err := binary.Write(w, binary.LittleEndian, int32(maxLen)); err != nil {
		return err
	}
	var buf []byte
	for i := range vocab {
		piece := " " + strconv.Itoa(i)
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(0))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(piece)))
		buf = append(buf, piece...)
	}
	_, err := w.Write(buf)
	return err
}

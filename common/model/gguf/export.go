package gguf

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"kvlab/common/model"
	"kvlab/common/tokenizer"
)

// Architecture names llama.cpp knows the supported models by
// (general.architecture, and the prefix of their hyperparameter keys).
const (
	ArchLlama  = "llama"
	ArchQwen3  = "qwen3"
	ArchGemma3 = "gemma3"
)

// Token types of tokenizer.ggml.token_type, as llama.cpp numbers them.
const (
	TokenNormal      int32 = 1
	TokenUnknown     int32 = 2
	TokenControl     int32 = 3
	TokenUserDefined int32 = 4
	TokenUnused      int32 = 5
	TokenByte        int32 = 6 // a byte-fallback token, <0xXX>
)

// llama.cpp's general.file_type values for the three float layouts ("most"
// because norm weights stay F32).
const (
	fileTypeAllF32     uint32 = 0
	fileTypeMostlyF16  uint32 = 1
	fileTypeMostlyBF16 uint32 = 32
)

// Pre-tokenizer split patterns, as tokenizer.json spells them, and the
// tokenizer.ggml.pre name under which llama.cpp applies the same split.
var preTokenizers = map[string]string{
	// Llama 3 (and the synthetic tokenizer of package tokenizer).
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
	// Qwen2 and Qwen3: digits one at a time.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "qwen2",
}

// Summary describes an exported file.
type Summary struct {
	Arch    string       // ArchLlama, ArchQwen3 or ArchGemma3
	Tensors []TensorInfo // as written, offsets included
	Vocab   int          // entries of tokenizer.ggml.tokens
	Pre     string       // tokenizer.ggml.pre
	Bytes   int64        // size of the file
}

// ExportFile writes the checkpoint in dir as a GGUF file at path (through
// a temporary file in the same directory, renamed once complete).
func ExportFile(dir, path string) (*Summary, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	cw := &countWriter{w: tmp}
	s, err := Export(dir, cw)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	s.Bytes = cw.n
	return s, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// planned is one tensor of the output: its GGUF name and where its values
// come from.
type planned struct {
	name   string // GGUF name
	hf     string // HuggingFace name; "" for a generated tensor
	shape  []int  // HuggingFace shape, [out, in] or [n]
	heads  int    // > 0: reorder the rows of each of this many heads for llama.cpp's RoPE
	typ    TensorType
	values []float32 // a generated tensor's values
	norm   bool      // Gemma RMSNorm: written as 1 + weight
}

// Export writes the checkpoint in dir (config.json, safetensors weights,
// tokenizer.json) to w as a GGUF file llama.cpp can run. A Gemma-3
// checkpoint is written as exportGemma3 says; a Llama or Qwen3 one gets:
//
//   - the metadata keys llama.cpp reads for the architecture ("llama" or
//     "qwen3"), with the values config.json gives;
//   - every weight under llama.cpp's tensor name, in the dtype it has on
//     disk (F32, BF16 or F16) except norm weights, which llama.cpp wants
//     as F32 (widening is exact); no output.weight when the embeddings are
//     tied, since llama.cpp then reuses token_embd;
//   - for Llama, the rows of each head of the query and key projections
//     reordered from HuggingFace's layout, which rotates feature i with
//     i+head_dim/2, to the original one, which rotates 2i with 2i+1 and
//     which llama.cpp's RoPE (LLAMA_ROPE_TYPE_NORM) expects: row 2i+s of a
//     head is HuggingFace's row s·head_dim/2+i. Qwen3 runs llama.cpp's
//     NEOX RoPE, HuggingFace's own order, so its rows stay;
//   - for Llama 3's rope_scaling, the per-frequency divisors as the tensor
//     rope_freqs.weight, computed as llama.cpp's converter computes them;
//   - the vocabulary of tokenizer.json as a "gpt2" (byte-level BPE)
//     tokenizer: tokens, token types, merges, bos and eos ids, whether BOS
//     is added, the chat template and the pre-tokenizer name.
func Export(dir string, w io.Writer) (*Summary, error) {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if cfg.Arch == model.ArchGemma3 {
		return exportGemma3(dir, cfg, w) // gemma3.go
	}
	arch, ok := map[string]string{model.ArchLlama: ArchLlama, model.ArchQwen3: ArchQwen3}[cfg.Arch]
	if !ok {
		return nil, fmt.Errorf("gguf: exporting %s is not supported (Llama, Qwen3 and Gemma-3 are)", cfg.Arch)
	}
	dtypes, err := diskDTypes(dir)
	if err != nil {
		return nil, err
	}
	plan, err := tensorPlan(cfg, arch, dtypes)
	if err != nil {
		return nil, err
	}
	vocab, err := readVocab(dir, cfg.VocabSize)
	if err != nil {
		return nil, err
	}

	kv := metadata(cfg, arch, filepath.Base(filepath.Clean(dir)), plan)
	kv = append(kv, vocab.kv()...)
	tensors, err := writeFile(w, dir, kv, plan)
	if err != nil {
		return nil, err
	}
	return &Summary{Arch: arch, Tensors: tensors, Vocab: len(vocab.tokens), Pre: vocab.pre}, nil
}

// writeFile writes the GGUF file of metadata kv and the tensors of plan
// to w, reading their values from the checkpoint in dir (rows reordered
// where heads is set, 1 added where norm is), and returns the tensors as
// written.
func writeFile(w io.Writer, dir string, kv []KV, plan []planned) ([]TensorInfo, error) {
	infos := make([]TensorInfo, len(plan))
	for i, p := range plan {
		infos[i] = TensorInfo{Name: p.name, Type: p.typ, Dims: ggufDims(p.shape)}
	}
	gw, err := NewWriter(w, kv, infos)
	if err != nil {
		return nil, err
	}

	ck, err := model.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	for _, p := range plan {
		data := p.values
		if p.hf != "" {
			ht, err := ck.Read(p.hf, p.shape...)
			if err != nil {
				return nil, err
			}
			data = ht.Data
		}
		if p.norm { // in place: a norm is read, never generated
			for i, x := range data {
				data[i] = 1 + x
			}
		}
		if p.heads > 0 {
			data = PermuteRoPE(data, p.heads, p.shape[0]/p.heads, p.shape[1])
		}
		raw, err := encode(data, p.typ)
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %s (%s): %w", p.name, p.hf, err)
		}
		if err := gw.WriteTensor(p.name, raw); err != nil {
			return nil, err
		}
	}
	if err := gw.Close(); err != nil {
		return nil, err
	}
	return gw.Tensors(), nil
}

// tensorType is the GGUF type that keeps weight hf in its on-disk dtype.
func tensorType(hf, dtype string) (TensorType, error) {
	switch dtype {
	case model.DTypeBF16:
		return BF16, nil
	case model.DTypeF16:
		return F16, nil
	case model.DTypeF32:
		return F32, nil
	}
	return F32, fmt.Errorf("gguf: tensor %q has dtype %s; want F32, BF16 or F16", hf, dtype)
}

// ggufDims turns a PyTorch shape into GGUF dims (fastest-varying first).
func ggufDims(shape []int) []uint64 {
	d := make([]uint64, len(shape))
	for i, n := range shape {
		d[len(shape)-1-i] = uint64(n)
	}
	return d
}

// PermuteRoPE reorders the rows of a projection of heads × headDim rows of
// cols values from HuggingFace's RoPE layout (feature i of a head rotates
// with feature i+headDim/2) to the interleaved one (2i with 2i+1): output
// row 2i+s of each head is input row s·headDim/2+i. It returns a new
// slice.
func PermuteRoPE(w []float32, heads, headDim, cols int) []float32 {
	out := make([]float32, len(w))
	half := headDim / 2
	for h := range heads {
		base := h * headDim
		for i := range half {
			for s := range 2 {
				dst := (base + 2*i + s) * cols
				src := (base + s*half + i) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}

// tensorPlan lists the output tensors in llama.cpp's naming, in the order
// HuggingFace's modules declare them.
func tensorPlan(c *model.Config, arch string, dtypes map[string]string) ([]planned, error) {
	h, q, kvd, inter := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	var plan []planned
	var errs []error
	add := func(name, hf string, heads int, shape ...int) {
		dt, ok := dtypes[hf]
		if !ok {
			errs = append(errs, fmt.Errorf("gguf: tensor %q is not in the checkpoint", hf))
			return
		}
		typ := F32 // norms: llama.cpp wants them in F32 (widening is exact)
		if len(shape) == 2 {
			var err error
			if typ, err = tensorType(hf, dt); err != nil {
				errs = append(errs, err)
			}
		}
		plan = append(plan, planned{name: name, hf: hf, shape: shape, heads: heads, typ: typ})
	}
	layer := func(l int, part string) string { return fmt.Sprintf("model.layers.%d.%s.weight", l, part) }
	blk := func(l int, part string) string { return fmt.Sprintf("blk.%d.%s.weight", l, part) }
	// Llama's q and k rows are reordered for llama.cpp's RoPE; Qwen3's are
	// not (see Export).
	qHeads, kHeads := c.NumAttentionHeads, c.NumKeyValueHeads
	if arch != ArchLlama {
		qHeads, kHeads = 0, 0
	}

	add("token_embd.weight", "model.embed_tokens.weight", 0, c.VocabSize, h)
	for l := range c.NumHiddenLayers {
		add(blk(l, "attn_norm"), layer(l, "input_layernorm"), 0, h)
		add(blk(l, "attn_q"), layer(l, "self_attn.q_proj"), qHeads, q, h)
		add(blk(l, "attn_k"), layer(l, "self_attn.k_proj"), kHeads, kvd, h)
		add(blk(l, "attn_v"), layer(l, "self_attn.v_proj"), 0, kvd, h)
		add(blk(l, "attn_output"), layer(l, "self_attn.o_proj"), 0, h, q)
		if arch == ArchQwen3 {
			add(blk(l, "attn_q_norm"), layer(l, "self_attn.q_norm"), 0, c.HeadDim)
			add(blk(l, "attn_k_norm"), layer(l, "self_attn.k_norm"), 0, c.HeadDim)
		}
		add(blk(l, "ffn_norm"), layer(l, "post_attention_layernorm"), 0, h)
		add(blk(l, "ffn_gate"), layer(l, "mlp.gate_proj"), 0, inter, h)
		add(blk(l, "ffn_up"), layer(l, "mlp.up_proj"), 0, inter, h)
		add(blk(l, "ffn_down"), layer(l, "mlp.down_proj"), 0, h, inter)
	}
	add("output_norm.weight", "model.norm.weight", 0, h)
	if !c.TieWordEmbeddings {
		add("output.weight", "lm_head.weight", 0, c.VocabSize, h)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if rs := c.RopeScaling; rs != nil && rs.RopeType == "llama3" {
		f := RopeFactors(c)
		plan = append(plan, planned{name: "rope_freqs.weight", shape: []int{len(f)}, typ: F32, values: f})
	}
	return plan, nil
}

// RopeFactors returns Llama 3's RoPE scaling as llama.cpp takes it: one
// divisor per frequency (llama.cpp rotates feature pair i by
// position·theta^(-2i/head_dim)/factor[i]), computed the way llama.cpp's
// converter computes them from config.json: 1 for short wavelengths,
// rope_scaling.factor for long ones, and a smooth blend in between. The
// frequencies are float32 as there; the rest is float64 rounded once.
func RopeFactors(c *model.Config) []float32 {
	rs := c.RopeScaling
	half := c.HeadDim / 2
	out := make([]float32, half)
	lowWavelen := float64(rs.OriginalMaxPositionEmbeddings) / rs.LowFreqFactor
	highWavelen := float64(rs.OriginalMaxPositionEmbeddings) / rs.HighFreqFactor
	for i := range out {
		exp := float32(2*i) / float32(c.HeadDim)
		freq := float32(1 / float32(math.Pow(c.RopeTheta, float64(exp))))
		wavelen := 2 * math.Pi / float64(freq)
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(rs.Factor)
		default:
			smooth := (float64(rs.OriginalMaxPositionEmbeddings)/wavelen - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/rs.Factor + smooth))
		}
	}
	return out
}

// metadata returns the model's hyperparameters under llama.cpp's keys.
func metadata(c *model.Config, arch, name string, plan []planned) []KV {
	ft := fileTypeAllF32
	for _, p := range plan {
		switch p.typ {
		case BF16:
			ft = fileTypeMostlyBF16
		case F16:
			ft = fileTypeMostlyF16
		}
	}
	k := func(s string) string { return arch + "." + s }
	kv := []KV{
		{"general.architecture", arch},
		{"general.name", name},
		{"general.file_type", ft},
		{k("vocab_size"), uint32(c.VocabSize)},
		{k("context_length"), uint32(c.MaxPositionEmbeddings)},
		{k("embedding_length"), uint32(c.HiddenSize)},
		{k("block_count"), uint32(c.NumHiddenLayers)},
		{k("feed_forward_length"), uint32(c.IntermediateSize)},
		{k("attention.head_count"), uint32(c.NumAttentionHeads)},
		{k("attention.head_count_kv"), uint32(c.NumKeyValueHeads)},
		{k("attention.key_length"), uint32(c.HeadDim)},
		{k("attention.value_length"), uint32(c.HeadDim)},
		{k("attention.layer_norm_rms_epsilon"), float32(c.RMSNormEps)},
		{k("rope.dimension_count"), uint32(c.HeadDim)},
		{k("rope.freq_base"), float32(c.RopeTheta)},
	}
	return kv
}

// vocabulary is what the GGUF file says about the tokenizer.
type vocabulary struct {
	tokens       []string
	types        []int32
	merges       []string
	pre          string
	bos          int32 // -1: none
	eos          int32 // -1: none
	addBOS       bool
	chatTemplate string
}

func (v *vocabulary) kv() []KV {
	kv := []KV{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", v.pre},
		{"tokenizer.ggml.tokens", v.tokens},
		{"tokenizer.ggml.token_type", v.types},
		{"tokenizer.ggml.merges", v.merges},
	}
	if v.bos >= 0 {
		kv = append(kv, KV{"tokenizer.ggml.bos_token_id", uint32(v.bos)})
	}
	if v.eos >= 0 {
		kv = append(kv, KV{"tokenizer.ggml.eos_token_id", uint32(v.eos)})
	}
	kv = append(kv, KV{"tokenizer.ggml.add_bos_token", v.addBOS}, KV{"tokenizer.ggml.add_eos_token", false})
	if v.chatTemplate != "" {
		kv = append(kv, KV{"tokenizer.chat_template", v.chatTemplate})
	}
	return kv
}

// tokenizerJSON is the part of tokenizer.json the export copies.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID      int32  `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Vocab  map[string]int32  `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
	} `json:"model"`
}

// loadTokenizer loads dir's tokenizer, and decodes its tokenizer.json into
// raw too, for the fields the exporters read that package tokenizer does
// not expose (vocabulary, merges, added tokens).
func loadTokenizer(dir string, raw any) (*tokenizer.Tokenizer, error) {
	tok, err := tokenizer.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gguf: %s has no %s; llama.cpp needs the model's vocabulary", dir, tokenizer.TokenizerFile)
	}
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, tokenizer.TokenizerFile))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, raw); err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", tokenizer.TokenizerFile, err)
	}
	return tok, nil
}

// readVocab reads dir's tokenizer as a GGUF vocabulary of size entries
// (the model's vocab_size: ids the tokenizer does not use become unused
// "[PADn]" tokens, as llama.cpp's converter writes them). The tokenizer
// must load in package tokenizer, which checks it is byte-level BPE.
func readVocab(dir string, size int) (*vocabulary, error) {
	var tj tokenizerJSON
	tok, err := loadTokenizer(dir, &tj)
	if err != nil {
		return nil, err
	}
	v := &vocabulary{tokens: make([]string, size), types: make([]int32, size), bos: -1, eos: -1}
	set := func(id int32, text string, typ int32) error {
		if id < 0 || int(id) >= size {
			return fmt.Errorf("gguf: token %q has id %d, outside the model's vocab_size %d", text, id, size)
		}
		v.tokens[id], v.types[id] = text, typ
		return nil
	}
	for text, id := range tj.Model.Vocab {
		if err := set(id, text, TokenNormal); err != nil {
			return nil, err
		}
	}
	for _, a := range tj.AddedTokens {
		typ := TokenUserDefined
		if a.Special {
			typ = TokenControl
		}
		if err := set(a.ID, a.Content, typ); err != nil {
			return nil, err
		}
	}
	for i := range v.tokens {
		if v.types[i] == 0 {
			v.tokens[i], v.types[i] = fmt.Sprintf("[PAD%d]", i), TokenUnused
		}
	}
	for i, m := range tj.Model.Merges {
		l, r, err := parseMerge(m)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: merge %d: %w", tokenizer.TokenizerFile, i, err)
		}
		v.merges = append(v.merges, l+" "+r)
	}
	if v.pre, err = preName(tj.PreTokenizer); err != nil {
		return nil, err
	}
	if id, ok := tok.BOS(); ok {
		v.bos = id
		// BOS is added when the tokenizer's prompt encoding puts it first.
		p := tok.EncodePrompt("a")
		v.addBOS = len(p) > len(tok.Encode("a")) && p[0] == id
	}
	if eos := tok.EOS(); len(eos) > 0 {
		v.eos = eos[0]
	}
	v.chatTemplate, err = chatTemplate(dir)
	return v, err
}

// parseMerge reads a merge written "left right" or ["left", "right"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		for i := range len(s) {
			if s[i] == ' ' {
				return s[:i], s[i+1:], nil
			}
		}
		return "", "", fmt.Errorf("%q is not two tokens separated by a space", s)
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("%s is neither \"a b\" nor [\"a\", \"b\"]", raw)
	}
	if slices.ContainsFunc(pair, func(t string) bool { return slices.Contains([]byte(t), ' ') }) {
		return "", "", fmt.Errorf("%s has a space inside a token, which a GGUF merge cannot hold", raw)
	}
	return pair[0], pair[1], nil
}

// preName returns llama.cpp's name for the pre-tokenizer's split pattern.
func preName(raw json.RawMessage) (string, error) {
	var patterns []string
	var walk func(raw json.RawMessage)
	walk = func(raw json.RawMessage) {
		var n struct {
			Type          string                 `json:"type"`
			Pattern       struct{ Regex string } `json:"pattern"`
			PreTokenizers []json.RawMessage      `json:"pretokenizers"`
		}
		if json.Unmarshal(raw, &n) != nil {
			return
		}
		if n.Type == "Split" && n.Pattern.Regex != "" {
			patterns = append(patterns, n.Pattern.Regex)
		}
		for _, c := range n.PreTokenizers {
			walk(c)
		}
	}
	walk(raw)
	if len(patterns) == 1 {
		if name, ok := preTokenizers[patterns[0]]; ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("gguf: the tokenizer's pre-tokenizer split %q is not one llama.cpp is known to apply the same way (Llama 3's or Qwen2's)", patterns)
}

// chatTemplate returns the chat template of tokenizer_config.json (a
// string) or else of chat_template.jinja, or "".
func chatTemplate(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, tokenizer.ConfigFile))
	if err == nil {
		var c struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return "", fmt.Errorf("gguf: %s: %w", tokenizer.ConfigFile, err)
		}
		var s string
		if json.Unmarshal(c.ChatTemplate, &s) == nil && s != "" {
			return s, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	src, err := os.ReadFile(filepath.Join(dir, tokenizer.ChatTemplateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(src), err
}

// diskDTypes returns the on-disk dtype of every tensor of the checkpoint
// in dir, from the safetensors headers.
func diskDTypes(dir string) (map[string]string, error) {
	files := []string{model.SingleFile}
	if _, err := os.Stat(filepath.Join(dir, model.SingleFile)); errors.Is(err, fs.ErrNotExist) {
		raw, err := os.ReadFile(filepath.Join(dir, model.IndexFile))
		if err != nil {
			return nil, fmt.Errorf("gguf: %s holds neither %s nor %s", dir, model.SingleFile, model.IndexFile)
		}
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(raw, &idx); err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", model.IndexFile, err)
		}
		files = files[:0]
		for _, f := range idx.WeightMap {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	out := map[string]string{}
	for _, name := range files {
		if name != filepath.Base(name) {
			return nil, fmt.Errorf("gguf: %s names shard %q outside the model directory", model.IndexFile, name)
		}
		st, err := model.OpenSafetensors(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		for _, ti := range st.Infos() {
			out[ti.Name] = ti.DType
		}
		st.Close()
	}
	return out, nil
}

// encode returns values as little-endian bytes of typ. Values must be
// exactly representable in typ (they were read from a file of that type).
func encode(values []float32, typ TensorType) ([]byte, error) {
	out := make([]byte, len(values)*typ.ElemSize())
	le := binary.LittleEndian
	for i, f := range values {
		switch typ {
		case F32:
			le.PutUint32(out[4*i:], math.Float32bits(f))
		case BF16:
			h, ok := BF16Bits(f)
			if !ok {
				return nil, fmt.Errorf("value %v at %d is not a bfloat16 value", f, i)
			}
			le.PutUint16(out[2*i:], h)
		case F16:
			h := model.F32ToF16(f)
			if g := model.F16ToF32(h); math.Float32bits(g) != math.Float32bits(f) && !(f != f && g != g) {
				return nil, fmt.Errorf("value %v at %d is not a float16 value", f, i)
			}
			le.PutUint16(out[2*i:], h)
		default:
			return nil, fmt.Errorf("type %v is not supported", typ)
		}
	}
	return out, nil
}

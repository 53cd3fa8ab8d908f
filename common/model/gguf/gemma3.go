package gguf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"

	"kvlab/common/model"
	"kvlab/common/tokenizer"
)

// exportGemma3 writes the Gemma-3 checkpoint in dir to w as a GGUF file
// llama.cpp runs as its "gemma3" architecture:
//
//   - the hyperparameters under llama.cpp's keys: the sliding window, the
//     period of the local:global layer pattern (llama.cpp makes the last
//     layer of every period global, so layer_types must repeat that
//     way), RoPE theta for the global layers and, as rope.freq_base_swa,
//     rope_local_base_freq for the local ones, the final logit soft cap;
//   - every weight under llama.cpp's name in its on-disk dtype, norms as
//     F32 with 1 added: Gemma's RMSNorm multiplies by 1 + weight, and
//     llama.cpp's by the weight. No q/k row reordering: Gemma's RoPE
//     rotates feature i with i + head_dim/2, as llama.cpp's NEOX RoPE does;
//   - the vocabulary as a SentencePiece one (tokenizer.ggml.model "llama"):
//     see gemmaVocab.
//
// llama.cpp fixes what config.json could change and this file cannot say:
// the attention scale is 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the
// 62-layer model), so query_pre_attn_scalar must be that; there is no
// attention soft cap.
func exportGemma3(dir string, cfg *model.Config, w io.Writer) (*Summary, error) {
	if err := gemmaExportable(cfg); err != nil {
		return nil, err
	}
	period, err := gemmaPeriod(cfg.LayerTypes)
	if err != nil {
		return nil, err
	}
	dtypes, err := diskDTypes(dir)
	if err != nil {
		return nil, err
	}
	plan, err := gemmaPlan(cfg, dtypes)
	if err != nil {
		return nil, err
	}
	vocab, err := gemmaVocab(dir, cfg)
	if err != nil {
		return nil, err
	}
	kv := gemmaMetadata(cfg, filepath.Base(filepath.Clean(dir)), period, plan)
	kv = append(kv, vocab...)
	tensors, err := writeFile(w, dir, kv, plan)
	if err != nil {
		return nil, err
	}
	return &Summary{Arch: ArchGemma3, Tensors: tensors, Vocab: cfg.VocabSize, Pre: "default"}, nil
}

// gemmaExportable refuses the Gemma-3 settings llama.cpp would run
// differently.
func gemmaExportable(c *model.Config) error {
	scalar := float64(c.HeadDim)
	if c.NumHiddenLayers == 62 { // llama.cpp's 27B rule
		scalar = float64(c.HiddenSize / c.NumAttentionHeads)
	}
	var errs []error
	if c.QueryPreAttnScalar != scalar {
		errs = append(errs, fmt.Errorf("query_pre_attn_scalar is %v; llama.cpp scales a %d-layer Gemma-3's queries by 1/sqrt(%v)", c.QueryPreAttnScalar, c.NumHiddenLayers, scalar))
	}
	if c.AttnLogitSoftcapping != 0 {
		errs = append(errs, fmt.Errorf("attn_logit_softcapping is %v; llama.cpp's Gemma-3 has none", c.AttnLogitSoftcapping))
	}
	if rs := c.RopeScaling; rs != nil && rs.RopeType != "linear" {
		errs = append(errs, fmt.Errorf("rope_scaling %q: only linear scaling is written for Gemma-3", rs.RopeType))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// gemmaPeriod returns the period p of layer_types as llama.cpp lays a
// sliding-window pattern out: layer i is global exactly when i%p == p-1
// (p = 1: every layer global). It refuses a pattern llama.cpp cannot
// express.
func gemmaPeriod(types []string) (uint32, error) {
	for p := 1; p <= len(types); p++ {
		ok := true
		for i, t := range types {
			if global := i%p == p-1; global != (t == model.LayerFull) {
				ok = false
				break
			}
		}
		if ok {
			return uint32(p), nil
		}
	}
	if !slices.Contains(types, model.LayerFull) {
		// Every layer local: a period longer than the model.
		return uint32(len(types) + 1), nil
	}
	return 0, fmt.Errorf("gguf: layer_types %v is not a repeating pattern of local layers ending in a global one, the only kind llama.cpp's Gemma-3 reads", types)
}

// gemmaPlan lists the output tensors in llama.cpp's naming, in the order
// HuggingFace's modules declare them.
func gemmaPlan(c *model.Config, dtypes map[string]string) ([]planned, error) {
	h, q, kvd, inter, hd := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.HeadDim
	var plan []planned
	var errs []error
	add := func(name, hf string, norm bool, shape ...int) {
		dt, ok := dtypes[hf]
		if !ok {
			errs = append(errs, fmt.Errorf("gguf: tensor %q is not in the checkpoint", hf))
			return
		}
		typ := F32 // norms are written as F32, with 1 added
		if !norm {
			var err error
			if typ, err = tensorType(hf, dt); err != nil {
				errs = append(errs, err)
			}
		}
		plan = append(plan, planned{name: name, hf: hf, shape: shape, typ: typ, norm: norm})
	}
	layer := func(l int, part string) string { return fmt.Sprintf("model.layers.%d.%s.weight", l, part) }
	blk := func(l int, part string) string { return fmt.Sprintf("blk.%d.%s.weight", l, part) }
	add("token_embd.weight", "model.embed_tokens.weight", false, c.VocabSize, h)
	for l := range c.NumHiddenLayers {
		add(blk(l, "attn_q"), layer(l, "self_attn.q_proj"), false, q, h)
		add(blk(l, "attn_k"), layer(l, "self_attn.k_proj"), false, kvd, h)
		add(blk(l, "attn_v"), layer(l, "self_attn.v_proj"), false, kvd, h)
		add(blk(l, "attn_output"), layer(l, "self_attn.o_proj"), false, h, q)
		add(blk(l, "attn_q_norm"), layer(l, "self_attn.q_norm"), true, hd)
		add(blk(l, "attn_k_norm"), layer(l, "self_attn.k_norm"), true, hd)
		add(blk(l, "ffn_gate"), layer(l, "mlp.gate_proj"), false, inter, h)
		add(blk(l, "ffn_up"), layer(l, "mlp.up_proj"), false, inter, h)
		add(blk(l, "ffn_down"), layer(l, "mlp.down_proj"), false, h, inter)
		add(blk(l, "attn_norm"), layer(l, "input_layernorm"), true, h)
		add(blk(l, "post_attention_norm"), layer(l, "post_attention_layernorm"), true, h)
		add(blk(l, "ffn_norm"), layer(l, "pre_feedforward_layernorm"), true, h)
		add(blk(l, "post_ffw_norm"), layer(l, "post_feedforward_layernorm"), true, h)
	}
	add("output_norm.weight", "model.norm.weight", true, h)
	if !c.TieWordEmbeddings {
		add("output.weight", "lm_head.weight", false, c.VocabSize, h)
	}
	return plan, errors.Join(errs...)
}

// gemmaMetadata returns the model's hyperparameters under llama.cpp's
// keys: metadata's, then Gemma-3's own.
func gemmaMetadata(c *model.Config, name string, period uint32, plan []planned) []KV {
	k := func(s string) string { return ArchGemma3 + "." + s }
	kv := append(metadata(c, ArchGemma3, name, plan),
		KV{Key: k("rope.freq_base_swa"), Value: float32(c.RopeLocalBaseFreq)},
		KV{Key: k("attention.sliding_window"), Value: uint32(c.SlidingWindow)},
		KV{Key: k("attention.sliding_window_pattern"), Value: period},
	)
	if c.FinalLogitSoftcapping > 0 {
		kv = append(kv, KV{Key: k("final_logit_softcapping"), Value: float32(c.FinalLogitSoftcapping)})
	}
	if rs := c.RopeScaling; rs != nil {
		kv = append(kv, KV{Key: k("rope.scaling.type"), Value: "linear"}, KV{Key: k("rope.scaling.factor"), Value: float32(rs.Factor)})
	}
	return kv
}

// gemmaTokenizerJSON is the part of a Gemma tokenizer.json the export
// reads.
type gemmaTokenizerJSON struct {
	AddedTokens []struct {
		ID      int32  `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Model struct {
		Type         string            `json:"type"`
		UnkToken     string            `json:"unk_token"`
		ByteFallback bool              `json:"byte_fallback"`
		Vocab        map[string]int32  `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
	} `json:"model"`
}

var byteToken = regexp.MustCompile(`^<0x[0-9A-F]{2}>$`)

// gemmaVocab returns the tokenizer metadata of dir's Gemma tokenizer.json
// (SentencePiece-style BPE with byte fallback: spaces written as "▁",
// nothing put before the text) as llama.cpp's SentencePiece vocabulary, of
// size entries (ids the tokenizer does not use become unused "[PADn]"
// tokens):
//
//   - llama.cpp merges the adjacent pair whose concatenation has the highest
//     score, so a token made by merge i (of the BPE's ranked merges) scores
//     -(i+1), and every other token 0 (single characters, bytes, added
//     tokens: no merge makes them). The same pairs merge in the same order
//     as in the BPE, except where a token can also be made from another
//     pair than its merge's, which SentencePiece merges and the BPE does
//     not: text may then split differently (token ids sent as ids are
//     unaffected);
//   - <0xXX> tokens are byte tokens, the unknown token is marked so, added
//     tokens are control (special) or user-defined;
//   - no space prefix (Gemma-3's normalizer adds none), BOS added, EOS not;
//     bos, eos (config.json's first eos_token_id), unknown, padding and
//     <end_of_turn> (as eot) ids; the chat template.
func gemmaVocab(dir string, cfg *model.Config) ([]KV, error) {
	size := cfg.VocabSize
	var tj gemmaTokenizerJSON
	tok, err := loadTokenizer(dir, &tj)
	if err != nil {
		return nil, err
	}
	if tj.Model.Type != "BPE" || !tj.Model.ByteFallback {
		return nil, fmt.Errorf("gguf: %s: a Gemma-3 vocabulary is a BPE with byte_fallback; have type %q, byte_fallback %v", tokenizer.TokenizerFile, tj.Model.Type, tj.Model.ByteFallback)
	}
	tokens, types, scores := make([]string, size), make([]int32, size), make([]float32, size)
	ids := map[string]int32{}
	set := func(id int32, text string, typ int32) error {
		if id < 0 || int(id) >= size {
			return fmt.Errorf("gguf: token %q has id %d, outside the model's vocab_size %d", text, id, size)
		}
		tokens[id], types[id] = text, typ
		ids[text] = id
		return nil
	}
	for text, id := range tj.Model.Vocab {
		typ := TokenNormal
		switch {
		case text == tj.Model.UnkToken:
			typ = TokenUnknown
		case byteToken.MatchString(text):
			typ = TokenByte
		}
		if err := set(id, text, typ); err != nil {
			return nil, err
		}
	}
	for _, a := range tj.AddedTokens {
		typ := TokenUserDefined
		switch {
		case a.Content == tj.Model.UnkToken:
			typ = TokenUnknown
		case a.Special:
			typ = TokenControl
		}
		if err := set(a.ID, a.Content, typ); err != nil {
			return nil, err
		}
	}
	for i := range tokens {
		if types[i] == 0 {
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), TokenUnused
		}
	}
	for i, m := range tj.Model.Merges {
		l, r, err := parseMerge(m)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: merge %d: %w", tokenizer.TokenizerFile, i, err)
		}
		if id, ok := ids[l+r]; ok && scores[id] == 0 {
			scores[id] = -float32(i + 1)
		}
	}
	chat, err := chatTemplate(dir)
	if err != nil {
		return nil, err
	}
	kv := []KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.scores", Value: scores},
		{Key: "tokenizer.ggml.token_type", Value: types},
	}
	if id, ok := tok.BOS(); ok {
		kv = append(kv, KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(id)})
	}
	if eos := cfg.EOSTokenIDs; len(eos) > 0 {
		kv = append(kv, KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos[0])})
	} else if eos := tok.EOS(); len(eos) > 0 {
		kv = append(kv, KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos[0])})
	}
	// The other token ids, keeping the id keys (bos and eos above) in
	// alphabetical order.
	for _, e := range []struct{ key, text string }{
		{"tokenizer.ggml.eot_token_id", tokenizer.GemmaEndOfTurn},
		{"tokenizer.ggml.padding_token_id", tokenizer.GemmaPad},
		{"tokenizer.ggml.unknown_token_id", tj.Model.UnkToken},
	} {
		if id, ok := ids[e.text]; ok && e.text != "" {
			kv = append(kv, KV{Key: e.key, Value: uint32(id)})
		}
	}
	kv = append(kv,
		KV{Key: "tokenizer.ggml.add_bos_token", Value: true},
		KV{Key: "tokenizer.ggml.add_eos_token", Value: false},
		KV{Key: "tokenizer.ggml.add_space_prefix", Value: false},
	)
	if chat != "" {
		kv = append(kv, KV{Key: "tokenizer.chat_template", Value: chat})
	}
	return kv, nil
}

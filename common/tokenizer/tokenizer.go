package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// File names inside a model directory.
const (
	TokenizerFile    = "tokenizer.json"
	ConfigFile       = "tokenizer_config.json"
	ChatTemplateFile = "chat_template.jinja"    // newer checkpoints keep the template here
	GenerationConfig = "generation_config.json" // its eos_token_id adds to EOS()
	ModelConfigFile  = "config.json"            // so does the model's
)

// Tokenizer turns text into token ids and back for one model. It is safe
// for concurrent use.
type Tokenizer struct {
	scheme    Scheme
	model     *bpe
	normalize func(string) string // nil: none
	stages    []preStage

	added       []addedToken          // content and id of every added token
	addedByText map[string]addedToken // by content
	addedLens   map[byte][]int        // by first byte: the contents' lengths, longest first
	special     map[int32]bool        // ids Decode skips

	tokens [][]byte  // id → the bytes it decodes to (nil for unknown ids)
	names  []string  // id → the token as the file writes it
	strip  stripSpec // what Decode strips from the start of the text

	prefix, suffix []int32 // what EncodePrompt adds around the text
	bos            int32
	hasBOS         bool
	eos            []int32

	bosText, eosText string
	chat             *chatTemplate // nil: no template
}

// Scheme names how a tokenizer maps text to its vocabulary.
type Scheme string

const (
	// ByteLevelBPE (GPT-2, Llama 3, Qwen2/3): the text's UTF-8 bytes are
	// written in a 256-character alphabet before the merges, so every
	// input is covered by the 256 byte tokens.
	ByteLevelBPE Scheme = "byte-level BPE"
	// SentencePieceBPE (Llama 2, Mistral, Gemma): merges run over Unicode
	// characters with spaces written as "▁"; a character outside the
	// vocabulary becomes <0xNN> byte tokens (byte fallback).
	SentencePieceBPE Scheme = "SentencePiece-style BPE"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID      int32  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// fileJSON is the part of tokenizer.json this package reads.
type fileJSON struct {
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

// configJSON is the part of tokenizer_config.json this package reads.
type configJSON struct {
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json
// (chat_template, bos and eos tokens, add_bos_token), dir/chat_template.jinja
// (used when the config has no template), and the eos_token_id of
// dir/generation_config.json and dir/config.json (added to EOS()). The error
// wraps fs.ErrNotExist when dir has no tokenizer.json.
//
// Two schemes are supported, both BPE (see Scheme): byte-level BPE (GPT-2,
// Llama 3, Qwen2/3 and the like) and SentencePiece-style BPE with byte
// fallback (Llama 2, Mistral, Gemma). The file decides which. Other model
// types (WordPiece, Unigram), pre-tokenizers, normalizers or decoders are an
// error rather than a silent mis-tokenization.
func Load(dir string) (*Tokenizer, error) {
	raw, err := os.ReadFile(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var cfg configJSON
	if rawCfg, err := os.ReadFile(filepath.Join(dir, ConfigFile)); err == nil {
		if err := json.Unmarshal(rawCfg, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", ConfigFile, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(raw, cfg)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", filepath.Join(dir, TokenizerFile), err)
	}
	if t.chat == nil {
		if src, err := os.ReadFile(filepath.Join(dir, ChatTemplateFile)); err == nil {
			t.chat = &chatTemplate{source: string(src)}
		}
	}
	for _, name := range []string{GenerationConfig, ModelConfigFile} {
		ids, err := readEOSIDs(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		for _, id := range ids {
			if !slices.Contains(t.eos, id) {
				t.eos = append(t.eos, id)
			}
		}
	}
	return t, nil
}

// Parse builds a tokenizer from the contents of tokenizer.json and, if not
// nil, tokenizer_config.json.
func Parse(tokenizerJSON, configJSONBytes []byte) (*Tokenizer, error) {
	var cfg configJSON
	if configJSONBytes != nil {
		if err := json.Unmarshal(configJSONBytes, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", ConfigFile, err)
		}
	}
	t, err := parse(tokenizerJSON, cfg)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

func parse(raw []byte, cfg configJSON) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	model, err := newBPE(f.Model)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{model: model, special: map[int32]bool{}, addedByText: map[string]addedToken{}, addedLens: map[byte][]int{}}
	if t.normalize, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	var kind preKind
	if t.stages, kind, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	dec, err := parseDecoder(f.Decoder)
	if err != nil {
		return nil, err
	}
	switch {
	case kind.byteLevel && !dec.byteLevel:
		return nil, fmt.Errorf("the pre_tokenizer is ByteLevel but the decoder is not; byte-level BPE decodes with ByteLevel")
	case kind.byteLevel && model.byteFallback:
		return nil, fmt.Errorf("byte_fallback is set but the pre_tokenizer is ByteLevel; a file is either byte-level BPE or SentencePiece-style BPE with byte fallback")
	case kind.byteLevel:
		t.scheme = ByteLevelBPE
	case dec.byteLevel:
		return nil, fmt.Errorf("pre_tokenizer has no ByteLevel step but the decoder is ByteLevel; byte-level BPE needs both")
	default:
		t.scheme = SentencePieceBPE
		t.strip = dec.strip
	}

	size := int32(0)
	for tok, id := range model.vocab {
		if id < 0 {
			return nil, fmt.Errorf("vocab entry %q has negative id %d", tok, id)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return nil, fmt.Errorf("added token %q has id %d", a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	t.tokens, t.names = make([][]byte, size), make([]string, size)
	for tok, id := range model.vocab {
		t.names[id] = tok
		if t.scheme == ByteLevelBPE {
			t.tokens[id] = unByteLevel(tok)
		} else {
			t.tokens[id] = dec.tokenBytes(tok)
		}
	}
	for _, a := range f.AddedTokens {
		if t.scheme == ByteLevelBPE {
			t.tokens[a.ID] = []byte(a.Content) // written as is, not in the byte alphabet
		} else {
			t.tokens[a.ID] = dec.tokenBytes(a.Content) // through the decoder, as the reference does
		}
		t.names[a.ID] = a.Content
		t.special[a.ID] = a.Special
		t.added = append(t.added, a)
		if _, dup := t.addedByText[a.Content]; !dup {
			t.addedByText[a.Content] = a
			c := a.Content[0]
			if !slices.Contains(t.addedLens[c], len(a.Content)) {
				t.addedLens[c] = append(t.addedLens[c], len(a.Content))
			}
		}
	}
	for _, lens := range t.addedLens {
		slices.SortFunc(lens, func(a, b int) int { return b - a })
	}

	if t.prefix, t.suffix, err = parsePostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	t.bosText, t.eosText = tokenText(cfg.BOSToken), tokenText(cfg.EOSToken)
	if id, ok := t.ID(t.bosText); ok && t.bosText != "" {
		t.bos, t.hasBOS = id, true
	}
	if id, ok := t.ID(t.eosText); ok && t.eosText != "" {
		t.eos = append(t.eos, id)
	}
	if cfg.AddBOSToken != nil {
		// An explicit add_bos_token overrides the post-processor, as the
		// transformers tokenizers do.
		t.prefix, t.suffix = nil, nil
		if *cfg.AddBOSToken && t.hasBOS {
			t.prefix = []int32{t.bos}
		}
	}
	if src, err := parseChatTemplate(cfg.ChatTemplate); err != nil {
		return nil, err
	} else if src != "" {
		t.chat = &chatTemplate{source: src}
	}
	return t, nil
}

// tokenText reads a bos_token or eos_token: null, a string, or an object
// with "content" (older configs).
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

// readEOSIDs reads eos_token_id (a number or a list) from a JSON file, if
// the file exists.
func readEOSIDs(path string) ([]int32, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var f struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if len(f.EOS) == 0 || string(f.EOS) == "null" {
		return nil, nil
	}
	var one int32
	if json.Unmarshal(f.EOS, &one) == nil {
		return []int32{one}, nil
	}
	var many []int32
	if err := json.Unmarshal(f.EOS, &many); err != nil {
		return nil, fmt.Errorf("%s: eos_token_id: %w", filepath.Base(path), err)
	}
	return many, nil
}

// parseNormalizer accepts no normalizer, the Unicode normal forms (Qwen's
// is NFC), Replace of a plain string (SentencePiece-style files write
// spaces as "▁" with it), Prepend, and a Sequence of those.
func parseNormalizer(raw json.RawMessage) (func(string) string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
		Pattern     map[string]string `json:"pattern"`
		Content     string            `json:"content"`
		Prepend     string            `json:"prepend"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	forms := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}
	if f, ok := forms[n.Type]; ok {
		return f.String, nil
	}
	switch n.Type {
	case "Replace":
		from, err := replacePattern("normalizer", n.Pattern)
		if err != nil {
			return nil, err
		}
		return func(s string) string { return strings.ReplaceAll(s, from, n.Content) }, nil
	case "Prepend":
		return func(s string) string {
			if s == "" {
				return s
			}
			return n.Prepend + s
		}, nil
	case "Sequence":
	default:
		return nil, fmt.Errorf("normalizer type %q is not supported (only NFC, NFD, NFKC, NFKD, Replace, Prepend and Sequence)", n.Type)
	}
	var steps []func(string) string
	for _, sub := range n.Normalizers {
		f, err := parseNormalizer(sub)
		if err != nil {
			return nil, err
		}
		if f != nil {
			steps = append(steps, f)
		}
	}
	return func(s string) string {
		for _, f := range steps {
			s = f(s)
		}
		return s
	}, nil
}

// replacePattern reads the pattern of a Replace normalizer or decoder,
// which must be a plain string: the files of both schemes replace " " or
// "▁" with {"String": ...}.
func replacePattern(where string, p map[string]string) (string, error) {
	from, ok := p["String"]
	if !ok || from == "" {
		return "", fmt.Errorf("%s Replace: pattern %v is not a non-empty String (Regex patterns are not supported)", where, p)
	}
	return from, nil
}

// templateJSON is a TemplateProcessing post-processor.
type templateJSON struct {
	Type          string            `json:"type"`
	Processors    []json.RawMessage `json:"processors"`
	Single        []json.RawMessage `json:"single"`
	SpecialTokens map[string]struct {
		IDs []int32 `json:"ids"`
	} `json:"special_tokens"`
}

// parsePostProcessor returns the ids a TemplateProcessing post-processor
// puts before and after a single sequence (Llama 3's puts
// <|begin_of_text|> before). Other post-processors add nothing here.
func parsePostProcessor(raw json.RawMessage) (prefix, suffix []int32, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var p templateJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, fmt.Errorf("post_processor: %w", err)
	}
	switch p.Type {
	case "Sequence":
		for _, sub := range p.Processors {
			pre, suf, err := parsePostProcessor(sub)
			if err != nil {
				return nil, nil, err
			}
			prefix, suffix = append(prefix, pre...), append(suffix, suf...)
		}
		return prefix, suffix, nil
	case "TemplateProcessing":
		seen := false
		for _, item := range p.Single {
			var it struct {
				Sequence     *struct{} `json:"Sequence"`
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
			}
			if err := json.Unmarshal(item, &it); err != nil {
				return nil, nil, fmt.Errorf("post_processor template: %w", err)
			}
			switch {
			case it.Sequence != nil:
				seen = true
			case it.SpecialToken != nil:
				st, ok := p.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, nil, fmt.Errorf("post_processor template names %q, which is not in its special_tokens", it.SpecialToken.ID)
				}
				if seen {
					suffix = append(suffix, st.IDs...)
				} else {
					prefix = append(prefix, st.IDs...)
				}
			}
		}
	}
	return prefix, suffix, nil
}

// Encode returns the ids of text, with no BOS or other post-processing.
// Added tokens (specials such as "<|eot_id|>" included) written literally
// in text become their ids (the longest one where several start at the same
// place); the text between them is normalized, pre-tokenized and run
// through the BPE merges.
func (t *Tokenizer) Encode(text string) []int32 {
	var out []int32
	start := 0
	for i := 0; i < len(text); i++ {
		for _, n := range t.addedLens[text[i]] {
			if i+n > len(text) {
				continue
			}
			if a, ok := t.addedByText[text[i:i+n]]; ok {
				out = t.encodePlain(text[start:i], start == 0, out)
				out = append(out, a.ID)
				start = i + n
				i = start - 1
				break
			}
		}
	}
	return t.encodePlain(text[start:], start == 0, out)
}

// encodePlain encodes text that holds no added token; atStart says whether
// it starts the text Encode was given.
func (t *Tokenizer) encodePlain(text string, atStart bool, out []int32) []int32 {
	if text == "" {
		return out
	}
	if t.normalize != nil {
		if text = t.normalize(text); text == "" {
			return out
		}
	}
	pieces := []string{text}
	for _, st := range t.stages {
		pieces = st.apply(pieces, atStart)
	}
	for _, p := range pieces {
		out = t.model.encodeWord(p, out)
	}
	return out
}

// EncodePrompt returns the ids a model expects for a raw prompt: Encode's,
// with BOS first when the tokenizer says so (add_bos_token in
// tokenizer_config.json, or else the post-processor's template).
//
// Text rendered by ApplyChatTemplate usually holds its BOS already; encode
// it with Encode (or use EncodeChat), not EncodePrompt.
func (t *Tokenizer) EncodePrompt(text string) []int32 {
	ids := append(slices.Clone(t.prefix), t.Encode(text)...)
	return append(ids, t.suffix...)
}

// Decode returns the text of ids, skipping special tokens and unknown ids.
// Bytes that do not form valid UTF-8 become U+FFFD. A SentencePiece-style
// tokenizer whose decoder strips the space its encoder put first (Llama 2's
// Strip) strips it here too.
func (t *Tokenizer) Decode(ids []int32) string {
	var buf []byte
	for _, id := range ids {
		buf = append(buf, t.bytesOf(id)...)
	}
	s, _ := t.strip.apply(string(bytes.ToValidUTF8(buf, []byte("\uFFFD"))), t.strip.start)
	return s
}

// bytesOf returns what id decodes to; nil for specials and unknown ids.
func (t *Tokenizer) bytesOf(id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) || t.special[id] {
		return nil
	}
	return t.tokens[id]
}

// Piece returns the bytes one token stands for: what Decode writes for it,
// or, for a special token, its text ("<|eot_id|>"), as llama.cpp's
// token-to-piece does. A lone piece may be part of a UTF-8 character.
// Unknown ids give nil.
func (t *Tokenizer) Piece(id int32) []byte {
	if t.special[id] {
		name, _ := t.Token(id)
		return []byte(name)
	}
	return t.bytesOf(id)
}

// PartialCharacters returns, in id order, the ordinary (not special)
// tokens whose piece is not valid UTF-8 by itself: a lone byte of a longer
// character, say. A client of a server that parses every answer as text
// (llama-server does) bans them to keep a random model's output valid.
func (t *Tokenizer) PartialCharacters() []int32 {
	var out []int32
	for id := range int32(t.VocabSize()) {
		if !t.IsSpecial(id) && !utf8.Valid(t.Piece(id)) {
			out = append(out, id)
		}
	}
	return out
}

// VocabSize returns one more than the largest id the tokenizer knows
// (vocabulary and added tokens). A model's embedding table may be larger
// (Qwen3 pads to 151936); ids beyond VocabSize decode to nothing.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the id of tokenizer_config.json's bos_token, if it names one.
func (t *Tokenizer) BOS() (int32, bool) { return t.bos, t.hasBOS }

// EOS returns every id that ends generation: tokenizer_config.json's
// eos_token first, then the eos_token_id of generation_config.json and of
// config.json when Load found them, without repeats. Empty if none.
func (t *Tokenizer) EOS() []int32 { return slices.Clone(t.eos) }

// ID returns the id of a token: an added token's content, or a vocabulary
// entry as the file writes it (in byte-level BPE " hello" is "Ġhello", in
// SentencePiece-style BPE "▁hello").
func (t *Tokenizer) ID(token string) (int32, bool) {
	if a, ok := t.addedByText[token]; ok {
		return a.ID, true
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// Token returns the token of id as the file writes it (ID's inverse):
// "Ġthe" or "▁the", "<0xE6>" for a byte token, an added token's content.
// ok is false for ids the tokenizer does not know.
func (t *Tokenizer) Token(id int32) (tok string, ok bool) {
	if id < 0 || int(id) >= len(t.names) || (t.names[id] == "" && t.tokens[id] == nil) {
		return "", false
	}
	return t.names[id], true
}

// Scheme returns the tokenizer's scheme, as its tokenizer.json declares it.
func (t *Tokenizer) Scheme() Scheme { return t.scheme }

// IsSpecial reports whether id is a special added token, which Decode skips.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.special[id] }

package tokenizer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Names of the synthetic tokenizer's special tokens, as in Llama 3.
const (
	SynthBOS         = "<|begin_of_text|>"
	SynthEOS         = "<|end_of_text|>"
	SynthStartHeader = "<|start_header_id|>"
	SynthEndHeader   = "<|end_header_id|>"
	SynthEOT         = "<|eot_id|>"
)

// llama3Pattern is Llama 3's pre-tokenizer split, which the synthetic
// tokenizer uses too: contractions, letters with at most one leading
// non-letter, digits in threes, punctuation runs, newline runs, spaces.
const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Llama3ChatTemplate is the chat template of the Llama 3 instruct models:
// each message as a header with its role, a blank line, the trimmed
// content and <|eot_id|>; BOS before the first.
const Llama3ChatTemplate = "{% set loop_messages = messages %}{% for message in loop_messages %}" +
	"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}" +
	"{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"

// synthCorpus is the text the synthetic tokenizer's merges are learned
// from, so its tokens look like English subwords rather than noise.
const synthCorpus = `A language model reads a prompt as a list of tokens and writes its answer one token at a time.
Each step looks at every token that came before, so the server keeps the keys and values of those tokens in a cache
instead of computing them again. The cache is cut into blocks of the same size; a request owns a list of blocks, and
when two requests start with the same text they can share the blocks of that prefix. The scheduler decides which
requests run in the next step: new prompts are split into chunks so that long ones do not stall the others, and
requests that are already decoding get one more token each. When memory runs out, the oldest blocks that nobody reads
are given back first. A tokenizer turns text into numbers and numbers back into text. It starts from the bytes of the
text, then joins the pairs that were most common in the text it learned from, again and again, until the pieces are
words or parts of words. The same rules, in the same order, give the same tokens for the same text every time.
This is why the model, the tokenizer and the chat template travel together: the model only knows the numbers it was
trained on. Questions, answers, names, places, dates like 2024-06-30, numbers such as 3.14159 and 1,000,000, and
punctuation (commas, dots; colons: quotes "like this") all become tokens too. Hello, world! How are you today?
I'm fine, thanks; we'll see what they've done. The quick brown fox jumps over the lazy dog.`

// letterOrder is English letters by frequency, the order in which the
// synthetic tokenizer extends tokens once the corpus has no pairs left.
const letterOrder = "etaoinshrdlcumwfgypbvkjxqz"

// WriteSynthetic writes tokenizer.json, tokenizer_config.json and
// generation_config.json for a synthetic model with vocabSize ids, of which
// bos and eos are <|begin_of_text|> and <|end_of_text|>.
//
// The tokenizer is a Llama-3-style byte-level BPE: the special tokens
// <|start_header_id|>, <|end_header_id|> and <|eot_id|> at the lowest ids
// not taken by bos and eos, then the 256 byte tokens, then merges learned
// from a short built-in English text (extended with frequent letters when
// the text runs out) until exactly vocabSize ids are used. Every byte
// sequence encodes. tokenizer_config.json names <|eot_id|> as eos_token
// (the end of a chat turn, as in the Llama 3 instruct models) and asks for
// BOS on raw prompts; generation_config.json lists both eos and <|eot_id|>
// as eos_token_id, so EOS() of the loaded tokenizer has both. The files
// depend only on the arguments.
func WriteSynthetic(dir string, vocabSize int, bos, eos int32) error {
	doc, cfg, gen, err := synthFiles(vocabSize, bos, eos)
	if err != nil {
		return err
	}
	return writeSynthFiles(dir, doc, cfg, gen)
}

// writeSynthFiles writes a synthetic tokenizer's three files into dir.
func writeSynthFiles(dir string, doc, cfg, gen []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{TokenizerFile: doc, ConfigFile: cfg, GenerationConfig: gen} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// synthIDs checks a synthetic tokenizer's bos and eos against vocabSize
// and returns the function that hands out the other ids in order,
// skipping those two.
func synthIDs(vocabSize int, bos, eos int32) (take func() int32, err error) {
	if bos < 0 || eos < 0 || int(bos) >= vocabSize || int(eos) >= vocabSize || bos == eos {
		return nil, fmt.Errorf("tokenizer: synthetic bos %d and eos %d must be distinct ids below %d", bos, eos, vocabSize)
	}
	next := int32(0)
	return func() int32 {
		for next == bos || next == eos {
			next++
		}
		next++
		return next - 1
	}, nil
}

// MinSyntheticVocab is the smallest vocabulary WriteSynthetic accepts: the
// five special tokens and the 256 bytes.
const MinSyntheticVocab = 5 + 256

func synthFiles(vocabSize int, bos, eos int32) (doc, cfg, gen []byte, err error) {
	if vocabSize < MinSyntheticVocab {
		return nil, nil, nil, fmt.Errorf("tokenizer: synthetic vocab of %d is too small: it needs %d ids for 5 special tokens and 256 bytes", vocabSize, MinSyntheticVocab)
	}
	// Hand out ids in order, skipping the two the model config fixed.
	take, err := synthIDs(vocabSize, bos, eos)
	if err != nil {
		return nil, nil, nil, err
	}
	specials := []addedToken{{ID: bos, Content: SynthBOS, Special: true}, {ID: eos, Content: SynthEOS, Special: true}}
	for _, name := range []string{SynthStartHeader, SynthEndHeader, SynthEOT} {
		specials = append(specials, addedToken{ID: take(), Content: name, Special: true})
	}

	var vocab []vocabEntry // in id order
	known := map[string]bool{}
	for b := range 256 {
		tok := string(byteToRune[b])
		vocab = append(vocab, vocabEntry{tok, take()})
		known[tok] = true
	}
	nMerges := vocabSize - len(specials) - 256
	trainOnce.Do(func() { trained = trainCorpus() })
	merges := learnMerges(trained, nMerges, known, string(byteToRune[' ']))
	for _, m := range merges {
		vocab = append(vocab, vocabEntry{m[0] + m[1], take()})
	}

	doc, err = synthTokenizerJSON(specials, vocab, merges, bos)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err = marshalIndent(map[string]any{
		"tokenizer_class":              "PreTrainedTokenizerFast",
		"bos_token":                    SynthBOS,
		"eos_token":                    SynthEOT,
		"add_bos_token":                true,
		"add_eos_token":                false,
		"clean_up_tokenization_spaces": false,
		"model_max_length":             131072,
		"chat_template":                Llama3ChatTemplate,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	gen, err = marshalIndent(map[string]any{
		"bos_token_id": bos,
		"eos_token_id": []int32{eos, specials[4].ID},
	})
	return doc, cfg, gen, err
}

type vocabEntry struct {
	tok string
	id  int32
}

// learnMerges returns n merges: first those of trained (the merges a small
// BPE training on synthCorpus finds, most frequent adjacent pair first)
// that make a token not yet known, then, if that is not enough, letter
// tokens (optionally after the space symbol, "Ġ" or "▁") extended by one
// letter in letterOrder. Each merge makes a token not in known, which it
// updates.
func learnMerges(trained [][2]string, n int, known map[string]bool, space string) [][2]string {
	var merges [][2]string
	for _, m := range trained {
		if len(merges) == n {
			break
		}
		if tok := m[0] + m[1]; !known[tok] {
			known[tok] = true
			merges = append(merges, m)
		}
	}

	// Extend letter tokens by one letter at a time, in a fixed order.
	isLetters := func(tok string) bool {
		tok = strings.TrimPrefix(tok, space)
		return tok != "" && strings.Trim(tok, letterOrder) == ""
	}
	var bases []string
	for _, c := range letterOrder {
		bases = append(bases, string(c))
	}
	bases = append([]string{space}, bases...)
	for _, m := range merges {
		if tok := m[0] + m[1]; isLetters(tok) {
			bases = append(bases, tok)
		}
	}
	for i := 0; len(merges) < n; i++ {
		for _, c := range letterOrder {
			if len(merges) == n {
				break
			}
			tok := bases[i] + string(c)
			if known[tok] {
				continue
			}
			known[tok] = true
			merges = append(merges, [2]string{bases[i], string(c)})
			bases = append(bases, tok)
		}
	}
	return merges
}

// synthTokenizerJSON writes tokenizer.json in the layout of Llama 3's,
// one vocabulary entry and one merge per line.
func synthTokenizerJSON(specials []addedToken, vocab []vocabEntry, merges [][2]string, bos int32) ([]byte, error) {
	return tokenizerJSON(specials, SynthBOS, bos, []jsonField{
		{"normalizer", nil},
		{"pre_tokenizer", map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": llama3Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}}},
	}, map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		`"unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true`,
		vocab, merges)
}

// jsonField is one top-level field of tokenizer.json, written in order.
type jsonField struct {
	key string
	val any
}

// tokenizerJSON writes a synthetic tokenizer.json: the added tokens
// (sorted by id, as real files are), the fields between them and the
// post-processor (normalizer and pre-tokenizer), a post-processor that puts
// bosToken (id bos) first, decoder, and a BPE model whose options after
// "dropout" are modelOptions, with one vocabulary entry and one merge per
// line.
func tokenizerJSON(added []addedToken, bosToken string, bos int32, pre []jsonField, decoder any, modelOptions string, vocab []vocabEntry, merges [][2]string) ([]byte, error) {
	type addedJSON struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var list []addedJSON
	for _, a := range added {
		list = append(list, addedJSON{ID: a.ID, Content: a.Content, Special: a.Special})
	}
	slices.SortFunc(list, func(a, b addedJSON) int { return cmp.Compare(a.ID, b.ID) })
	bosItem := map[string]any{"SpecialToken": map[string]any{"id": bosToken, "type_id": 0}}
	head := append([]jsonField{
		{"version", "1.0"},
		{"truncation", nil},
		{"padding", nil},
		{"added_tokens", list},
	}, pre...)
	head = append(head,
		jsonField{"post_processor", map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{bosItem, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{bosItem, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": bosToken, "type_id": 1}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{bosToken: map[string]any{"id": bosToken, "ids": []int32{bos}, "tokens": []string{bosToken}}},
		}},
		jsonField{"decoder", decoder})
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for _, kv := range head {
		v, err := marshalCompact(kv.val)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "  %q: %s,\n", kv.key, v)
	}
	buf.WriteString(`  "model": {"type": "BPE", "dropout": null, ` + modelOptions + ",\n")
	buf.WriteString("    \"vocab\": {\n")
	for i, e := range vocab {
		k, err := marshalCompact(e.tok)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "      %s: %d%s\n", k, e.id, comma(i, len(vocab)))
	}
	buf.WriteString("    },\n    \"merges\": [\n")
	for i, m := range merges {
		v, err := marshalCompact(m[:])
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "      %s%s\n", v, comma(i, len(merges)))
	}
	buf.WriteString("    ]\n  }\n}\n")
	return buf.Bytes(), nil
}

func comma(i, n int) string {
	if i+1 < n {
		return ","
	}
	return ""
}

// marshalCompact is json.Marshal without HTML escaping, so "<|eot_id|>"
// stays readable in the files.
func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func marshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// trained caches the merges of the BPE training on synthCorpus, which do
// not depend on the vocabulary size (a smaller one takes a prefix): tests
// write synthetic models by the hundred.
var (
	trainOnce sync.Once
	trained   [][2]string
)

// trainCorpus runs the BPE training on synthCorpus, split into words as
// the synthetic byte-level tokenizer splits them.
func trainCorpus() [][2]string {
	split, err := newSplitter(llama3Pattern)
	if err != nil {
		panic(err) // a constant pattern
	}
	counts := map[string]int{}
	for _, w := range split.split(synthCorpus, nil) {
		counts[byteLevel(w)]++
	}
	return trainWords(counts)
}

// trainWords runs a BPE training on words (with their counts) until no
// pair occurs twice: the most frequent adjacent pair of symbols is merged
// first, ties broken by the pair's text, starting from one symbol per
// character.
func trainWords(counts map[string]int) [][2]string {
	type word struct {
		syms  []string
		count int
	}
	var words []word
	for w, c := range counts {
		var syms []string
		for _, r := range w {
			syms = append(syms, string(r))
		}
		words = append(words, word{syms, c})
	}

	var merges [][2]string
	for {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.count
			}
		}
		var best [2]string
		bestCount := 0
		for p, c := range pairs {
			if c > bestCount || (c == bestCount && p[0]+" "+p[1] < best[0]+" "+best[1]) {
				best, bestCount = p, c
			}
		}
		if bestCount < 2 {
			break
		}
		for i := range words {
			s := words[i].syms
			out := s[:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == best[0] && s[j+1] == best[1] {
					out = append(out, best[0]+best[1])
					j++
				} else {
					out = append(out, s[j])
				}
			}
			words[i].syms = out
		}
		merges = append(merges, best)
	}
	return merges
}

package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Names of the synthetic Gemma tokenizer's added tokens, as in Gemma-3.
const (
	GemmaPad            = "<pad>"
	GemmaEOS            = "<eos>"
	GemmaBOS            = "<bos>"
	GemmaUnk            = "<unk>"
	GemmaMask           = "<mask>"
	GemmaStartOfTurn    = "<start_of_turn>"
	GemmaEndOfTurn      = "<end_of_turn>"
	GemmaStartOfImage   = "<start_of_image>"
	GemmaEndOfImage     = "<end_of_image>"
	GemmaImageSoftToken = "<image_soft_token>"
)

// metaspace is the character SentencePiece-style vocabularies write a
// space as: U+2581 LOWER ONE EIGHTH BLOCK.
const metaspace = "\u2581"

// Gemma3ChatTemplate renders a chat the way Gemma-3 instruct models expect
// it: BOS, then each turn as <start_of_turn>, the role ("model" for the
// assistant), a newline, the trimmed content and <end_of_turn> with a
// newline; a system message has no turn of its own but goes before the
// first user message, followed by a blank line. Turns must alternate user,
// assistant, user, ... The template is this package's own;
// tests/tokenizers checks that it renders as the template of Gemma-3's
// tokenizer_config.json does.
const Gemma3ChatTemplate = "{{ bos_token }}" +
	"{% set ns = namespace(prefix='', first=0) %}" +
	"{% if messages and messages[0]['role'] == 'system' %}" +
	"{% set ns.prefix = messages[0]['content'] + '\n\n' %}{% set ns.first = 1 %}{% endif %}" +
	"{% for m in messages[ns.first:] %}" +
	"{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
	"{{ raise_exception('Gemma expects turns to alternate user, assistant, user, ... after an optional system message') }}{% endif %}" +
	"{% if m['role'] == 'assistant' %}{{ '<start_of_turn>model\n' }}{% else %}{{ '<start_of_turn>' + m['role'] + '\n' }}{% endif %}" +
	"{% if loop.first %}{{ ns.prefix }}{% endif %}{{ m['content'] | trim }}{{ '<end_of_turn>\n' }}" +
	"{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"

// gemmaAdded are the added tokens of WriteSyntheticGemma in id order (bos
// and eos go to the ids the model fixes), and whether each is special.
var gemmaAdded = []struct {
	content string
	special bool
}{
	{GemmaPad, true}, {GemmaEOS, true}, {GemmaBOS, true}, {GemmaUnk, true}, {GemmaMask, false},
	{GemmaStartOfTurn, true}, {GemmaEndOfTurn, true},
	{GemmaStartOfImage, true}, {GemmaEndOfImage, true}, {GemmaImageSoftToken, true},
}

// MinSyntheticGemmaVocab is the smallest vocabulary WriteSyntheticGemma
// accepts: its ten added tokens, the 256 byte tokens and "▁".
const MinSyntheticGemmaVocab = 10 + 256 + 1

// WriteSyntheticGemma writes tokenizer.json, tokenizer_config.json and
// generation_config.json for a synthetic Gemma-3 model with vocabSize ids,
// of which bos and eos are <bos> and <eos>. It is WriteSynthetic's sibling
// for the other scheme.
//
// The tokenizer is SentencePiece-style BPE laid out as Gemma-3's: the
// normalizer writes spaces as "▁" and nothing is put before the text; the
// pre-tokenizer (a Split at spaces, which are all gone by then) leaves the
// text whole; the BPE has byte_fallback and fuse_unk; the decoder is
// Replace "▁" → " ", ByteFallback, Fuse; the post-processor puts <bos>
// first. The ids: <pad>, <unk>, <mask>, <start_of_turn>, <end_of_turn>,
// <start_of_image>, <end_of_image> and <image_soft_token> at the lowest ids
// not taken by bos and eos (<pad> 0, <unk> 3 ... with Gemma's bos 2 and
// eos 1), then the 256 byte tokens <0x00> to <0xFF>, then the characters of
// a built-in English text, most frequent first ("▁" leads), then merges
// learned from that text until exactly vocabSize ids are used. A character
// outside the vocabulary, which is most of Unicode, encodes as its UTF-8
// bytes. tokenizer_config.json names <end_of_turn> as eos_token, asks for
// BOS on raw prompts and holds Gemma3ChatTemplate; generation_config.json
// lists eos and <end_of_turn> as eos_token_id. The files depend only on
// the arguments.
func WriteSyntheticGemma(dir string, vocabSize int, bos, eos int32) error {
	doc, cfg, gen, err := synthGemmaFiles(vocabSize, bos, eos)
	if err != nil {
		return err
	}
	return writeSynthFiles(dir, doc, cfg, gen)
}

func synthGemmaFiles(vocabSize int, bos, eos int32) (doc, cfg, gen []byte, err error) {
	if vocabSize < MinSyntheticGemmaVocab {
		return nil, nil, nil, fmt.Errorf("tokenizer: synthetic Gemma vocab of %d is too small: it needs %d ids for 10 added tokens, 256 bytes and %q", vocabSize, MinSyntheticGemmaVocab, metaspace)
	}
	take, err := synthIDs(vocabSize, bos, eos)
	if err != nil {
		return nil, nil, nil, err
	}
	var added []addedToken
	var vocab []vocabEntry
	ids := map[string]int32{}
	for _, a := range gemmaAdded {
		id := int32(-1)
		switch a.content {
		case GemmaBOS:
			id = bos
		case GemmaEOS:
			id = eos
		default:
			id = take()
		}
		added = append(added, addedToken{ID: id, Content: a.content, Special: a.special})
		vocab = append(vocab, vocabEntry{a.content, id}) // Gemma's vocab holds them too
		ids[a.content] = id
	}
	known := map[string]bool{}
	for b := range 256 {
		tok := byteToken(byte(b))
		vocab = append(vocab, vocabEntry{tok, take()})
		known[tok] = true
	}
	gemmaTrainOnce.Do(func() { gemmaAlphabet, gemmaTrained = trainGemma() })
	room := vocabSize - len(vocab)
	for _, c := range gemmaAlphabet[:min(room, len(gemmaAlphabet))] {
		vocab = append(vocab, vocabEntry{c, take()})
		known[c] = true
	}
	var merges [][2]string
	if room > len(gemmaAlphabet) {
		merges = learnMerges(gemmaTrained, room-len(gemmaAlphabet), known, metaspace)
		for _, m := range merges {
			vocab = append(vocab, vocabEntry{m[0] + m[1], take()})
		}
	}
	slices.SortFunc(vocab, func(a, b vocabEntry) int { return cmp.Compare(a.id, b.id) })

	doc, err = synthGemmaJSON(added, vocab, merges, bos)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err = marshalIndent(map[string]any{
		"tokenizer_class":               "GemmaTokenizer",
		"bos_token":                     GemmaBOS,
		"eos_token":                     GemmaEndOfTurn,
		"pad_token":                     GemmaPad,
		"unk_token":                     GemmaUnk,
		"add_bos_token":                 true,
		"add_eos_token":                 false,
		"clean_up_tokenization_spaces":  false,
		"spaces_between_special_tokens": false,
		"model_max_length":              32768,
		"chat_template":                 Gemma3ChatTemplate,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	gen, err = marshalIndent(map[string]any{
		"bos_token_id": bos,
		"eos_token_id": []int32{eos, ids[GemmaEndOfTurn]},
		"pad_token_id": ids[GemmaPad],
	})
	return doc, cfg, gen, err
}

// gemmaAlphabet and gemmaTrained cache trainGemma's result.
var (
	gemmaTrainOnce sync.Once
	gemmaAlphabet  []string
	gemmaTrained   [][2]string
)

// trainGemma returns the characters of synthCorpus with spaces written as
// "▁", most frequent first (ties in character order), and the merges a BPE
// training finds on its words. As SentencePiece trains, a word is a run of
// characters after a "▁" (the "▁" included) and a newline is a word of its
// own, so learned tokens look like "▁the"; encoding does not split, as
// Gemma-3's does not.
func trainGemma() ([]string, [][2]string) {
	text := strings.ReplaceAll(synthCorpus, " ", metaspace)
	freq := map[string]int{}
	for _, r := range text {
		freq[string(r)]++
	}
	var alphabet []string
	for c := range freq {
		alphabet = append(alphabet, c)
	}
	slices.SortFunc(alphabet, func(a, b string) int {
		if c := cmp.Compare(freq[b], freq[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	atSpace, err := newSplitter(metaspace)
	if err != nil {
		panic(err) // a constant pattern
	}
	atNewline, err := newSplitter("\n")
	if err != nil {
		panic(err)
	}
	counts := map[string]int{}
	for _, line := range atNewline.split(text, nil) {
		for _, w := range atSpace.splitAs(line, mergedWithNext, nil) {
			counts[w]++
		}
	}
	return alphabet, trainWords(counts)
}

// synthGemmaJSON writes tokenizer.json in the layout of Gemma-3's, one
// vocabulary entry and one merge per line.
func synthGemmaJSON(added []addedToken, vocab []vocabEntry, merges [][2]string, bos int32) ([]byte, error) {
	return tokenizerJSON(added, GemmaBOS, bos, []jsonField{
		{"normalizer", map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": metaspace}},
		{"pre_tokenizer", map[string]any{"type": "Split", "pattern": map[string]string{"String": " "}, "behavior": "MergedWithPrevious", "invert": false}},
	}, map[string]any{"type": "Sequence", "decoders": []any{
		map[string]any{"type": "Replace", "pattern": map[string]string{"String": metaspace}, "content": " "},
		map[string]any{"type": "ByteFallback"},
		map[string]any{"type": "Fuse"},
	}},
		`"unk_token": "`+GemmaUnk+`", "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false`,
		vocab, merges)
}

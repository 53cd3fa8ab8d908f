package tokenizer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixtures in testdata are small tokenizers in the two formats this
// package must read. Both have the 256 byte tokens at ids 0-255 in byte
// order, so a byte's id is its value, and a few merges on top:
//
// llama3 (merges as pairs, ignore_merges on, BOS from the post-processor):
//
//	256 Ġt  257 ll  258 ell  259 he  260 Ġthe  261 hell  262 hello
//	263 Ã© (é)  264 ca  265 caf  266 café  267 12  268 123  269 ĠĠ  270 ĊĊ
//	271 Ġworld (in the vocab, no merge makes it)
//	272 <|begin_of_text|>  273 <|end_of_text|>  274 <|start_header_id|>
//	275 <|end_header_id|>  276 <|eot_id|>
//
// qwen3 (merges as "a b" strings, NFC, single digits, no BOS):
//
//	256 Ġw  257 or  258 Ġwor  259 ld  260 Ġworld  261 12
//	262 hello (in the vocab, no merge makes it)
//	263 <|endoftext|>  264 <|im_start|>  265 <|im_end|>  (special)
//	266 <think>  267 </think>  (added, not special)
func load(t *testing.T, name string) *Tokenizer {
	t.Helper()
	tok, err := Load(filepath.Join("testdata", name))
	require.NoError(t, err)
	return tok
}

func TestEncodeLlama3(t *testing.T) {
	tok := load(t, "llama3")
	tests := []struct {
		name string
		text string
		want []int32
	}{
		{"empty", "", nil},
		{"merges in rank order", "hello the world", []int32{262, 260, 271}},
		{"é is two bytes merged", "café", []int32{266}},
		{"merges below a word", "cafés", []int32{266, 's'}},
		{"digits in threes", "12345", []int32{268, '4', '5'}},
		{"space run gives its last space to the word", "a   b", []int32{'a', 269, ' ', 'b'}},
		{"trailing spaces stay together", "a  ", []int32{'a', 269}},
		{"newline run", "a\n\nb", []int32{'a', 270, 'b'}},
		{"space then newline", "a \n b", []int32{'a', ' ', '\n', ' ', 'b'}},
		{"contraction, any case", "I'LL", []int32{'I', '\'', 'L', 'L'}},
		{"CJK letters are bytes", "日本", []int32{0xE6, 0x97, 0xA5, 0xE6, 0x9C, 0xAC}},
		{"emoji is four bytes", "😀", []int32{0xF0, 0x9F, 0x98, 0x80}},
		{"specials in text", "<|begin_of_text|>hello<|eot_id|>", []int32{272, 262, 276}},
		{"special after a space", "hi <|eot_id|>", []int32{'h', 'i', ' ', 276}},
		{"unfinished special is text", "<|eot_id", []int32{'<', '|', 'e', 'o', 't', '_', 'i', 'd'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := tok.Encode(tt.text)
			assert.Equal(t, tt.want, have, "have %v; want %v", have, tt.want)
		})
	}
}

func TestEncodeQwen3(t *testing.T) {
	tok := load(t, "qwen3")
	tests := []struct {
		name string
		text string
		want []int32
	}{
		{"merges", " world", []int32{260}},
		{"no ignore_merges: a vocab word no merge reaches is bytes", "hello", []int32{'h', 'e', 'l', 'l', 'o'}},
		{"words", "hello world", []int32{'h', 'e', 'l', 'l', 'o', 260}},
		{"single digits never merge", "12", []int32{'1', '2'}},
		{"NFC joins e and the combining accent", "e\u0301", []int32{0xC3, 0xA9}},
		{"added non-special tokens", "<think>x</think>", []int32{266, 'x', 267}},
		{"chat markup", "<|im_start|>user\nhi<|im_end|>", []int32{264, 'u', 's', 'e', 'r', '\n', 'h', 'i', 265}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := tok.Encode(tt.text)
			assert.Equal(t, tt.want, have, "have %v; want %v", have, tt.want)
		})
	}
}

// TestSplit checks the pre-tokenizer patterns piece by piece, with the
// lookahead \s+(?!\S) that Go's regexp cannot express handled by hand.
func TestSplit(t *testing.T) {
	qwen := strings.Replace(llama3Pattern, `\p{N}{1,3}`, `\p{N}`, 1)
	tests := []struct {
		pattern, text string
		want          []string
	}{
		{llama3Pattern, "a   b", []string{"a", "  ", " b"}},
		{llama3Pattern, "x  ", []string{"x", "  "}},
		{llama3Pattern, " \tx", []string{" ", "\tx"}},
		{llama3Pattern, "a\u3000\u3000b", []string{"a", "\u3000", "\u3000b"}}, // Unicode \s
		{llama3Pattern, "12345", []string{"123", "45"}},
		{llama3Pattern, "don't", []string{"don", "'t"}},
		{llama3Pattern, "Hello, world!\n\n", []string{"Hello", ",", " world", "!\n\n"}},
		{llama3Pattern, "a \n\n b", []string{"a", " \n\n", " b"}},
		{llama3Pattern, "<|eot_id", []string{"<|", "eot", "_id"}},
		{qwen, "12345", []string{"1", "2", "3", "4", "5"}},
		{gpt2Pattern, "Hello  world", []string{"Hello", " ", " world"}},
		{`\d+`, "ab12cd", []string{"ab", "12", "cd"}}, // the gaps are pieces too
		{`x*`, "abc", []string{"abc"}},                // empty matches split nothing
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			s, err := newSplitter(tt.pattern)
			require.NoError(t, err)
			have := s.split(tt.text, nil)
			assert.Equal(t, tt.want, have, "have %q; want %q", have, tt.want)
		})
	}
}

func TestDecode(t *testing.T) {
	llama, qwen := load(t, "llama3"), load(t, "qwen3")
	tests := []struct {
		name string
		tok  *Tokenizer
		ids  []int32
		want string
	}{
		{"specials skipped", llama, []int32{272, 262, 260, 271, 276}, "hello the world"},
		{"byte tokens join into characters", llama, []int32{0xE6, 0x97, 0xA5, 266}, "日café"},
		{"unknown ids skipped", llama, []int32{-1, 262, 100000}, "hello"},
		{"invalid UTF-8 becomes U+FFFD", llama, []int32{'a', 0xFF, 'b'}, "a\uFFFDb"},
		{"added non-special tokens kept", qwen, []int32{264, 266, 'h', 'm', 267, 260, 265}, "<think>hm</think> world"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := tt.tok.Decode(tt.ids)
			assert.Equal(t, tt.want, have, "have %q; want %q", have, tt.want)
		})
	}
}

func TestSpecialTokens(t *testing.T) {
	llama, qwen := load(t, "llama3"), load(t, "qwen3")

	bos, ok := llama.BOS()
	assert.True(t, ok)
	assert.Equal(t, int32(272), bos)
	// eos_token of tokenizer_config.json, then generation_config.json's list.
	assert.Equal(t, []int32{276, 273}, llama.EOS())
	assert.Equal(t, []int32{272, 262}, llama.EncodePrompt("hello"), "the post-processor adds BOS")
	assert.Equal(t, 277, llama.VocabSize())

	_, ok = qwen.BOS()
	assert.False(t, ok)
	assert.Equal(t, []int32{265}, qwen.EOS())
	assert.Equal(t, []int32{'h', 'i'}, qwen.EncodePrompt("hi"), "add_bos_token false, no BOS")
	assert.True(t, qwen.IsSpecial(265))
	assert.False(t, qwen.IsSpecial(266))
	id, ok := qwen.ID("<think>")
	assert.True(t, ok)
	assert.Equal(t, int32(266), id)
	id, ok = qwen.ID("Ġworld")
	assert.True(t, ok)
	assert.Equal(t, int32(260), id)
}

// TestAddBOSTokenOverrides: an explicit add_bos_token decides, whatever the
// post-processor says.
func TestAddBOSTokenOverrides(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "llama3", TokenizerFile))
	require.NoError(t, err)
	tests := []struct {
		config string
		want   []int32
	}{
		{`{"bos_token": "<|begin_of_text|>", "add_bos_token": false}`, []int32{262}},
		{`{"bos_token": "<|begin_of_text|>", "add_bos_token": true}`, []int32{272, 262}},
		{`{"bos_token": "<|begin_of_text|>"}`, []int32{272, 262}},
		{`{"bos_token": {"content": "<|end_of_text|>"}, "add_bos_token": true}`, []int32{273, 262}},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			tok, err := Parse(raw, []byte(tt.config))
			require.NoError(t, err)
			have := tok.EncodePrompt("hello")
			assert.Equal(t, tt.want, have, "have %v; want %v", have, tt.want)
		})
	}
}

func TestStream(t *testing.T) {
	tok := load(t, "llama3")
	tests := []struct {
		name  string
		ids   []int32
		want  []string // Next's result for each id
		flush string
	}{
		{"é split in two tokens", []int32{'c', 0xC3, 0xA9}, []string{"c", "", "é"}, ""},
		{"emoji in four", []int32{0xF0, 0x9F, 0x98, 0x80, '!'}, []string{"", "", "", "😀", "!"}, ""},
		{"special tokens add nothing", []int32{272, 0xE6, 276, 0x97, 0xA5}, []string{"", "", "", "", "日"}, ""},
		{"a byte that never starts a character", []int32{0xFF, 'a'}, []string{"\uFFFD", "a"}, ""},
		{"a start broken by ASCII", []int32{0xE6, 'a'}, []string{"", "\uFFFDa"}, ""},
		{"an unfinished character at the end", []int32{'x', 0xF0, 0x9F}, []string{"x", "", ""}, "\uFFFD"},
		{"whole tokens", []int32{262, 260, 271}, []string{"hello", " the", " world"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tok.NewStream()
			var have []string
			for _, id := range tt.ids {
				have = append(have, s.Next(id))
			}
			if diff := cmp.Diff(tt.want, have); diff != "" {
				t.Errorf("Next: have %q; want %q (-want +have)\n%s", have, tt.want, diff)
			}
			flush := s.Flush()
			assert.Equal(t, tt.flush, flush, "Flush: have %q; want %q", flush, tt.flush)
			assert.Equal(t, tok.Decode(tt.ids), strings.Join(have, "")+flush, "the stream adds up to Decode")
		})
	}
}

func TestChatTemplate(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Hi, who are you?"}}
	// The expected strings are what transformers renders for these templates.
	tests := []struct {
		dir    string
		genPro bool
		want   string
	}{
		{"llama3", true, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHi, who are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3", false, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>" +
			"<|start_header_id|>user<|end_header_id|>\n\nHi, who are you?<|eot_id|>"},
		{"qwen3", true, "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi, who are you?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen3", false, "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi, who are you?<|im_end|>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			tok := load(t, tt.dir)
			require.True(t, tok.HasChatTemplate())
			have, err := tok.ApplyChatTemplate(msgs, tt.genPro)
			require.NoError(t, err)
			assert.Equal(t, tt.want, have, "have %q; want %q", have, tt.want)
		})
	}

	t.Run("qwen3 drops an earlier turn's thinking", func(t *testing.T) {
		have, err := load(t, "qwen3").ApplyChatTemplate([]Message{
			{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "<think>\nhmm\n</think>\n\nHello!"}, {Role: "user", Content: "Bye"}}, true)
		require.NoError(t, err)
		want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
		assert.Equal(t, want, have, "have %q; want %q", have, want)
	})

	t.Run("qwen3 renders a tool call and its result", func(t *testing.T) {
		call := map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Paris"}}}
		have, err := load(t, "qwen3").ApplyChatTemplate([]Message{
			{Role: "user", Content: "Weather?"},
			{Role: "assistant", ToolCalls: []any{call}},
			{Role: "tool", Content: "sunny", ToolCallID: "c1", Name: "get_weather"}}, true)
		require.NoError(t, err)
		// What transformers renders, but for the JSON's spacing: gonja's
		// tojson writes it compact, Python's json.dumps with ", " and ": ";
		// the call is compared as JSON.
		before, rest, ok := strings.Cut(have, "<tool_call>\n")
		require.True(t, ok, have)
		callJSON, after, ok := strings.Cut(rest, "\n</tool_call>")
		require.True(t, ok, have)
		assert.Equal(t, "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", before)
		assert.JSONEq(t, `{"name": "get_weather", "arguments": {"city": "Paris"}}`, callJSON)
		want := "<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
		assert.Equal(t, want, after, "have %q; want %q", after, want)
	})

	t.Run("tool fields are absent unless set", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("testdata", "llama3", TokenizerFile))
		require.NoError(t, err)
		tok, err := Parse(raw, []byte(`{"chat_template": "{% for m in messages %}[{{ m.tool_calls is defined }} {{ m.tool_call_id is defined }} {{ m.name is defined }}]{% endfor %}"}`))
		require.NoError(t, err)
		have, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}, {Role: "tool", Content: "r", ToolCallID: "c", Name: "f"}}, false)
		require.NoError(t, err)
		assert.Equal(t, "[False False False][False True True]", have)
	})

	t.Run("EncodeChat has one BOS", func(t *testing.T) {
		ids, err := load(t, "llama3").EncodeChat([]Message{{Role: "user", Content: "hello"}}, true)
		require.NoError(t, err)
		want := []int32{272, 274, 'u', 's', 'e', 'r', 275, 270, 262, 276, 274, 'a', 's', 's', 'i', 's', 't', 'a', 'n', 't', 275, 270}
		assert.Equal(t, want, ids, "have %v; want %v", ids, want)
	})

	t.Run("no template", func(t *testing.T) {
		dir := t.TempDir()
		raw, err := os.ReadFile(filepath.Join("testdata", "llama3", TokenizerFile))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, TokenizerFile), raw, 0o644))
		tok, err := Load(dir)
		require.NoError(t, err)
		assert.False(t, tok.HasChatTemplate())
		_, err = tok.ApplyChatTemplate(msgs, true)
		assert.ErrorIs(t, err, ErrNoChatTemplate)
		_, ok := tok.BOS()
		assert.False(t, ok, "no config, no BOS")
		assert.Empty(t, tok.EOS())
	})

	t.Run("raise_exception and bad templates", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("testdata", "llama3", TokenizerFile))
		require.NoError(t, err)
		tok, err := Parse(raw, []byte(`{"chat_template": "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be the user') }}{% endif %}ok"}`))
		require.NoError(t, err)
		_, err = tok.ApplyChatTemplate([]Message{{Role: "assistant", Content: "x"}}, false)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "first message must be the user")
		have, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}}, false)
		require.NoError(t, err)
		assert.Equal(t, "ok", have)

		tok, err = Parse(raw, []byte(`{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}`))
		require.NoError(t, err)
		have, err = tok.ApplyChatTemplate(nil, false)
		require.NoError(t, err)
		assert.Equal(t, "D", have, "the template named default")

		tok, err = Parse(raw, []byte(`{"chat_template": "{% for %}"}`))
		require.NoError(t, err, "a template is parsed when first used")
		_, err = tok.ApplyChatTemplate(nil, false)
		assert.ErrorContains(t, err, "parsing chat template")

		tok, err = Parse(raw, []byte(`{"chat_template": "{% include 'tokenizer.json' %}"}`))
		require.NoError(t, err)
		_, err = tok.ApplyChatTemplate(nil, false)
		assert.Error(t, err, "templates may not read files")
	})
}

func TestLoadErrors(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "llama3", TokenizerFile))
	require.NoError(t, err)
	edit := func(old, new string) string {
		require.Contains(t, string(good), old)
		return strings.Replace(string(good), old, new, 1)
	}
	tests := []struct {
		name, file, config, want string
	}{
		{"malformed json", `{"model": `, "", "unexpected end of JSON"},
		{"malformed config", string(good), `{"bos_token": `, ConfigFile},
		{"WordPiece", `{"model": {"type": "WordPiece", "vocab": {"a": 0}}, "decoder": {"type": "WordPiece"}}`, "", `model type "WordPiece" is not supported`},
		{"Unigram", `{"model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.5]]}, "decoder": {"type": "Metaspace"}}`, "", `model type "Unigram" is not supported`},
		{"byte_fallback with ByteLevel", edit(`"byte_fallback": false`, `"byte_fallback": true`), "", "byte_fallback is set but the pre_tokenizer is ByteLevel"},
		{"Metaspace with a ByteLevel decoder", edit(`"type": "ByteLevel", "add_prefix_space": false`, `"type": "Metaspace", "replacement": "▁", "add_prefix_space": false`), "", "no ByteLevel step but the decoder is ByteLevel"},
		{"no ByteLevel", edit(`, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}`, ``), "", "no ByteLevel step"},
		{"ByteLevel and Metaspace", edit(`{"type": "ByteLevel", "add_prefix_space": false`, `{"type": "Metaspace", "replacement": "▁"}, {"type": "ByteLevel", "add_prefix_space": false`), "", "both ByteLevel and Metaspace"},
		{"lookbehind", edit(`\\s+(?!\\S)|\\s+`, `(?<=x)\\s+`), "", "beyond Go's regexp"},
		{"decoder", edit(`"decoder": {"type": "ByteLevel"`, `"decoder": {"type": "WordPiece"`), "", `decoder type "WordPiece" is not supported`},
		{"ByteLevel pre-tokenizer, other decoder", edit(`"decoder": {"type": "ByteLevel"`, `"decoder": {"type": "Fuse"`), "", "the pre_tokenizer is ByteLevel but the decoder is not"},
		{"ByteLevel decoder mixed", edit(`"decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`, `"decoder": {"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "Fuse"}]}`), "", `decoder type "Fuse" does not go with ByteLevel`},
		{"no decoder", edit(`"decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`, `"decoder": null`), "", "no decoder"},
		{"merge of unknown tokens", edit(`["Ġ", "t"]`, `["Ġ", "zz"]`), "", "not in the vocab"},
		{"normalizer", edit(`"normalizer": null`, `"normalizer": {"type": "Lowercase"}`), "", `normalizer type "Lowercase"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(tt.file), 0o644))
			if tt.config != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tt.config), 0o644))
			}
			_, err := Load(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want, "have %v; want it to mention %q", err, tt.want)
		})
	}

	t.Run("missing", func(t *testing.T) {
		_, err := Load(t.TempDir())
		assert.True(t, errors.Is(err, fs.ErrNotExist), "have %v; want fs.ErrNotExist", err)
	})
}

// FuzzRoundTrip: every byte sequence encodes, to ids the tokenizer knows,
// and decodes back to itself (invalid UTF-8 as U+FFFD); streaming gives the
// same text. Added tokens written in the text are exempt, since Decode
// skips specials.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "hello the world", "a   b\n\n c  ", "café 日本 😀", "12345 x\u3000\u3000y", "\xff\xe6a\xf0\x9f", "I'LL don't"} {
		f.Add(s)
	}
	synth := f.TempDir()
	if err := WriteSynthetic(synth, 512, 1, 2); err != nil {
		f.Fatal(err)
	}
	var toks []*Tokenizer
	for _, dir := range []string{filepath.Join("testdata", "llama3"), synth} {
		tok, err := Load(dir)
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			for _, a := range tok.added {
				if strings.Contains(s, a.Content) {
					t.Skip("text holds an added token")
				}
			}
			ids := tok.Encode(s)
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tok.VocabSize())
				}
			}
			want := strings.ToValidUTF8(s, "\uFFFD")
			if have := tok.Decode(ids); have != want {
				t.Fatalf("Decode(Encode(%q)): have %q; want %q", s, have, want)
			}
			st := tok.NewStream()
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(st.Next(id))
			}
			b.WriteString(st.Flush())
			if utf8Valid := want == s; utf8Valid && b.String() != s {
				t.Fatalf("stream of %q: have %q; want %q", s, b.String(), s)
			}
		}
	})
}

// TestPartialCharacters: what it lists are ordinary tokens whose piece
// alone is not UTF-8, a byte-level vocabulary has some, and a word's token
// is not among them.
func TestPartialCharacters(t *testing.T) {
	tok, err := Load("testdata/llama3")
	require.NoError(t, err)
	ids := tok.PartialCharacters()
	require.NotEmpty(t, ids, "a byte-level vocabulary has lone bytes of longer characters")
	listed := map[int32]bool{}
	for _, id := range ids {
		listed[id] = true
		assert.False(t, tok.IsSpecial(id), "id %d", id)
		assert.False(t, utf8.Valid(tok.Piece(id)), "id %d: piece %q", id, tok.Piece(id))
	}
	for _, id := range tok.Encode(" the") {
		assert.False(t, listed[id], "the piece %q is whole UTF-8", tok.Piece(id))
	}
}

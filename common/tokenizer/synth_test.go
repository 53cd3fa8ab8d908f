package tokenizer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteSynthetic(t *testing.T) {
	for _, vocab := range []int{MinSyntheticVocab, 512, 4096} {
		t.Run("", func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, WriteSynthetic(dir, vocab, 1, 2))
			tok, err := Load(dir)
			require.NoError(t, err)
			assert.Equal(t, vocab, tok.VocabSize(), "have %d; want %d", tok.VocabSize(), vocab)

			for _, tc := range []struct {
				name string
				id   int32
			}{{SynthBOS, 1}, {SynthEOS, 2}, {SynthStartHeader, 0}, {SynthEndHeader, 3}, {SynthEOT, 4}} {
				id, ok := tok.ID(tc.name)
				assert.True(t, ok && id == tc.id, "%s: have %d; want %d", tc.name, id, tc.id)
			}
			bos, ok := tok.BOS()
			assert.True(t, ok && bos == 1, "BOS: have %d; want 1", bos)
			assert.Equal(t, []int32{4, 2}, tok.EOS(), "eos_token <|eot_id|>, then generation_config's <|end_of_text|>")

			// Every single byte, and all of them in a row, encode to known ids.
			var all []byte
			for b := range 256 {
				ids := tok.Encode(string([]byte{byte(b)}))
				require.Len(t, ids, 1, "byte %#x: have %v; want one id", b, ids)
				all = append(all, byte(b))
			}
			for _, id := range tok.Encode(string(all)) {
				assert.True(t, id >= 0 && int(id) < vocab, "id %d outside [0, %d)", id, vocab)
			}

			text := "Hello, world! The cache keeps 12345 keys. café 日本 😀"
			ids := tok.EncodePrompt(text)
			assert.Equal(t, int32(1), ids[0], "add_bos_token")
			assert.Equal(t, text, tok.Decode(ids))

			chat, err := tok.EncodeChat([]Message{{Role: "user", Content: "Hi"}}, true)
			require.NoError(t, err)
			assert.Equal(t, []int32{1, 0}, chat[:2], "BOS once, then <|start_header_id|>")
		})
	}
}

func TestWriteSyntheticMerges(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, 4096, 1, 2))
	tok, err := Load(dir)
	require.NoError(t, err)
	// The merges come from English text: common words are one token.
	for _, w := range []string{" the", " token", " and"} {
		ids := tok.Encode(w)
		assert.Len(t, ids, 1, "%q: have %v; want one token", w, ids)
	}
}

func TestWriteSyntheticDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, WriteSynthetic(a, 512, 1, 2))
	require.NoError(t, WriteSynthetic(b, 512, 1, 2))
	for _, name := range []string{TokenizerFile, ConfigFile, GenerationConfig} {
		x, err := os.ReadFile(filepath.Join(a, name))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(x, y), "%s differs between two writes", name)
	}
}

func TestWriteSyntheticIDs(t *testing.T) {
	// bos and eos far from the low ids: everything else flows around them.
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, 300, 299, 100))
	tok, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, 300, tok.VocabSize())
	id, _ := tok.ID(SynthBOS)
	assert.Equal(t, int32(299), id)
	id, _ = tok.ID(SynthEOS)
	assert.Equal(t, int32(100), id)
	assert.Equal(t, "x y", tok.Decode(tok.Encode("x y")))
}

func TestWriteSyntheticErrors(t *testing.T) {
	tests := []struct {
		name     string
		vocab    int
		bos, eos int32
		want     string
	}{
		{"too small", MinSyntheticVocab - 1, 1, 2, "too small"},
		{"bos outside", 512, 512, 2, "below 512"},
		{"same ids", 512, 1, 1, "distinct"},
		{"negative", 512, -1, 2, "distinct ids"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteSynthetic(t.TempDir(), tt.vocab, tt.bos, tt.eos)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want, "have %v; want it to mention %q", err, tt.want)
		})
	}
}

// TestSyntheticTemplateIsLlama3: the synthetic chat template is the one in
// the Llama 3 fixture.
func TestSyntheticTemplateIsLlama3(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, 512, 1, 2))
	synth, llama := loadAt(t, dir), load(t, "llama3")
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Why?"}}
	a, err := synth.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	b, err := llama.ApplyChatTemplate(msgs, true)
	require.NoError(t, err)
	assert.Equal(t, b, a)
}

func loadAt(t *testing.T, dir string) *Tokenizer {
	t.Helper()
	tok, err := Load(dir)
	require.NoError(t, err)
	return tok
}

func BenchmarkWriteSynthetic(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if err := WriteSynthetic(dir, 4096, 1, 2); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	dir := b.TempDir()
	if err := WriteSynthetic(dir, 4096, 1, 2); err != nil {
		b.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	text := synthCorpus
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text)
	}
}

// TestPieceSpellsTheText: the pieces of an encoded text, joined, are the
// text again, and a special token's piece is its name.
func TestPieceSpellsTheText(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, 512, 1, 2))
	tok := loadAt(t, dir)
	text := "the cache keeps a shared prefix, héllo"
	var joined []byte
	for _, id := range tok.Encode(text) {
		joined = append(joined, tok.Piece(id)...)
	}
	assert.Equal(t, text, string(joined))
	eot, ok := tok.ID(SynthEOT)
	require.True(t, ok)
	assert.Equal(t, SynthEOT, string(tok.Piece(eot)))
	assert.Nil(t, tok.Piece(99999))
	assert.Contains(t, tok.ChatTemplate(), "add_generation_prompt")
}

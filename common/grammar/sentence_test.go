package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

func mustParseFile(t *testing.T, path string) *Grammar {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(string(src))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

// acceptSplit feeds s in random chunks (cutting UTF-8 sequences apart, as
// byte-level tokens do) and reports whether every chunk was accepted.
func acceptSplit(m *Matcher, s []byte, rng *rand.Rand) bool {
	for len(s) > 0 {
		n := 1 + rng.IntN(min(len(s), 5))
		if !m.Accept(s[:n]) {
			return false
		}
		s = s[n:]
	}
	return true
}

// TestLlamaGrammarsParse: llama.cpp's own example grammars parse, and their
// random sentences are accepted whole.
func TestLlamaGrammarsParse(t *testing.T) {
	files, _ := filepath.Glob("testdata/llama/*.gbnf")
	if len(files) < 3 {
		t.Fatalf("want llama.cpp's example grammars in testdata/llama, found %d", len(files))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range files {
		g := mustParseFile(t, f)
		sg := newSentenceGen(g, rng, 12)
		for range 200 {
			s := sg.sentence()
			m := g.NewMatcher()
			if !acceptSplit(m, s, rng) || !m.CanEnd() {
				t.Fatalf("%s: sentence %q refused", f, s)
			}
		}
	}
}

// TestJSONSentencesAreJSON: the reference for the JSON grammars is
// encoding/json. Every random sentence is accepted and is valid JSON.
func TestJSONSentencesAreJSON(t *testing.T) {
	for _, f := range []string{"testdata/json.gbnf", "testdata/llama/json.gbnf", "testdata/llama/json_arr.gbnf"} {
		testJSONSentences(t, f)
	}
}

func testJSONSentences(t *testing.T, file string) {
	g := mustParseFile(t, file)
	rng := rand.New(rand.NewPCG(3, 4))
	sg := newSentenceGen(g, rng, 10)
	for range 1000 {
		s := sg.sentence()
		if !json.Valid(s) {
			t.Fatalf("grammar sentence %q is not JSON", s)
		}
		m := g.NewMatcher()
		if !acceptSplit(m, s, rng) || !m.CanEnd() {
			t.Fatalf("sentence %q refused", s)
		}
	}
}

// TestJSONAgreesWithEncodingJSON: mutated sentences are accepted exactly
// when encoding/json calls them valid.
func TestJSONAgreesWithEncodingJSON(t *testing.T) {
	g := mustParseFile(t, "testdata/json.gbnf")
	rng := rand.New(rand.NewPCG(5, 6))
	sg := newSentenceGen(g, rng, 8)
	alphabet := []byte("{}[],:\"\\ 0123456789.eE-+tfnrulsa\x01é")
	for range 3000 {
		s := mutate(sg.sentence(), alphabet, rng)
		m := g.NewMatcher()
		got := m.Accept(s) && m.CanEnd()
		// encoding/json does not check UTF-8; the grammar refuses bad UTF-8.
		if want := json.Valid(s) && utf8.Valid(s); got != want {
			t.Fatalf("%q: grammar says %v, encoding/json says %v", s, got, want)
		}
	}
}

// mutate inserts, deletes or replaces a few bytes.
func mutate(s, alphabet []byte, rng *rand.Rand) []byte {
	s = append([]byte(nil), s...)
	for k := rng.IntN(3); k >= 0; k-- {
		i := 0
		if len(s) > 0 {
			i = rng.IntN(len(s) + 1)
		}
		c := alphabet[rng.IntN(len(alphabet))]
		switch rng.IntN(3) {
		case 0:
			s = append(s[:i], append([]byte{c}, s[i:]...)...)
		case 1:
			if i < len(s) {
				s = append(s[:i], s[i+1:]...)
			}
		case 2:
			if i < len(s) {
				s[i] = c
			}
		}
	}
	return s
}

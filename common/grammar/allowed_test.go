package grammar

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomVocab is a byte-level-like vocabulary: all 256 single bytes, then
// random strings over the given bytes (so multi-byte characters are often
// cut apart), a few duplicates, and empty (special) tokens.
func randomVocab(rng *rand.Rand, n int, alphabet []byte) [][]byte {
	pieces := make([][]byte, 0, n+256)
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for len(pieces) < n+256 {
		switch rng.IntN(20) {
		case 0:
			pieces = append(pieces, nil)
		case 1:
			pieces = append(pieces, slices.Clone(pieces[rng.IntN(len(pieces))]))
		default:
			p := make([]byte, 1+rng.IntN(8))
			for i := range p {
				p[i] = alphabet[rng.IntN(len(alphabet))]
			}
			pieces = append(pieces, p)
		}
	}
	rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
	return pieces
}

// pickAllowed is a random token of mask over v (uniform over its set
// bits), for tests that walk a grammar by the tokens it allows; false when
// mask allows none.
func pickAllowed(rng *rand.Rand, v *Vocab, mask []uint64) (int, bool) {
	var ids []int
	for id := range v.Len() {
		if mask[id>>6]>>(id&63)&1 != 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	return ids[rng.IntN(len(ids))], true
}

// TestAllowedAgreesWithPlain: the trie walk and Clone+Accept per token give
// the same mask, on random regular grammars and the JSON grammar, from
// states reached by random prefixes of sentences (cut at any byte, so
// inside UTF-8 sequences too).
func TestAllowedAgreesWithPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var alphabet []byte
	for _, r := range regRunes {
		alphabet = append(alphabet, string(r)...)
	}
	alphabet = append(alphabet, []byte(`{}[],:0123456789 truefalsn`)...)
	json := mustParseFile(t, "testdata/json.gbnf")
	nonEmpty := 0
	for gi := range 120 {
		g := json
		if gi%3 != 0 {
			rg := &regGen{rng: rng}
			body, _, _ := rg.expr(4)
			var err error
			if g, err = Parse(strings.Join(append([]string{"root ::= " + body}, rg.rules...), "\n")); err != nil {
				t.Fatal(err)
			}
		}
		v := NewVocab(randomVocab(rng, 300+rng.IntN(700), alphabet))
		sg := newSentenceGen(g, rng, 8)
		// One matcher fed a sentence chunk by chunk keeps its mask cache
		// from one call to the next; each mask must still be exact.
		walker := g.NewMatcher()
		rest := sg.sentence()
		for len(rest) > 0 {
			k := 1 + rng.IntN(min(len(rest), 4))
			if !walker.Accept(rest[:k]) {
				t.Fatal("a sentence was refused")
			}
			rest = rest[k:]
			if got, want := walker.Allowed(v, nil), walker.allowedPlain(v, nil); !slices.Equal(got, want) {
				t.Fatalf("grammar %d: a reused cache gave a wrong mask", gi)
			}
		}
		for range 8 {
			s := sg.sentence()
			m := g.NewMatcher()
			if !m.Accept(s[:rng.IntN(len(s)+1)]) {
				t.Fatal("a prefix of a sentence was refused")
			}
			want := m.allowedPlain(v, nil)
			got := m.Allowed(v, make([]uint64, 3)) // short: must grow
			if !slices.Equal(got, want) {
				for id := range v.Len() {
					w, g := want[id>>6]>>(id&63)&1, got[id>>6]>>(id&63)&1
					if w != g {
						t.Fatalf("token %d %q: trie %d, plain %d", id, v.pieces[id], g, w)
					}
				}
			}
			for _, w := range want {
				if w != 0 {
					nonEmpty++
					break
				}
			}
		}
	}
	if nonEmpty < 500 {
		t.Fatalf("only %d masks allowed anything: the test is too weak", nonEmpty)
	}
}

// TestAllowedSpecialTokens: a nil or empty piece is never allowed, and
// Allowed leaves the matcher as it was.
func TestAllowedSpecialTokens(t *testing.T) {
	g, err := Parse(`root ::= [a-z]*`)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVocab([][]byte{nil, []byte("ab"), {}, []byte("A"), []byte("ab"), []byte("z")})
	m := g.NewMatcher()
	got := m.Allowed(v, nil)
	if want := uint64(1<<1 | 1<<4 | 1<<5); got[0] != want {
		t.Fatalf("mask %b, want %b", got[0], want)
	}
	if !m.CanEnd() || !m.Accept([]byte("q")) {
		t.Fatal("Allowed changed the matcher")
	}
}

// TestAllowedCacheFull: with a cache of two states, most of the walk goes
// uncached; the mask is the same.
func TestAllowedCacheFull(t *testing.T) {
	defer func(n int) { maxDFAStates = n }(maxDFAStates)
	maxDFAStates = 2
	rng := rand.New(rand.NewPCG(11, 12))
	g := mustParseFile(t, "testdata/json.gbnf")
	v := NewVocab(randomVocab(rng, 2000, []byte(`{}[],:"\0123456789 truefalsnÃ©`)))
	m := g.NewMatcher()
	for _, chunk := range []string{`{"a`, `": [1`, `, "\u00`, `e9", tr`} {
		if !m.Accept([]byte(chunk)) {
			t.Fatalf("%q refused", chunk)
		}
		if got, want := m.Allowed(v, nil), m.allowedPlain(v, nil); !slices.Equal(got, want) {
			t.Fatalf("after %q: masks differ", chunk)
		}
	}
}

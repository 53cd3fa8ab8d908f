package grammar

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRuneShortcutAgreesWithPlain: a transition that completes a UTF-8
// sequence is shared by the code points the same stacks hold, never by two
// that some stack tells apart. The grammar's alternatives start with
// classes that overlap in every way over 2-, 3- and 4-byte code points, so
// a key that forgot a stack, or the base it was computed from, would give
// one code point another's state (after "!" the same code points are
// told apart by other classes, from a state of other stacks); the masks are checked against Clone and
// Accept per token, and the shortcut must have been taken.
func TestRuneShortcutAgreesWithPlain(t *testing.T) {
	g, err := Parse(`root ::= ( [α-ω] "a" | [^α-ω!] "b" | [α-κ] "c" | "é" "d" | [一-龥😀] "e" )* "!" ( [α-λ] "f" | [^α-λ] "g" )*`)
	if err != nil {
		t.Fatal(err)
	}
	runes := []rune("αβκλμωéèa中一😀😁bcdefg!")
	var alphabet []byte
	for _, r := range runes {
		alphabet = append(alphabet, string(r)...)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := randomVocab(rng, 3000, alphabet)
	for _, r := range runes { // every code point whole, then with each follower
		for _, f := range []string{"", "a", "b", "c", "d", "e", "f", "g", "!"} {
			pieces = append(pieces, []byte(string(r)+f))
		}
	}
	v := NewVocab(pieces)
	hits := 0
	for _, prefix := range []string{"", "αa", "λa", "éd", "éb", "中b", "一e", "😀e", "😁b", "κc", "\xce", "!", "αa!λf", "!中g"} {
		m := g.NewMatcher()
		if !m.Accept([]byte(prefix)) {
			t.Fatalf("prefix %q refused", prefix)
		}
		// A clone walks with empty caches, m itself again with the table
		// of its first call: both must be exact.
		for _, x := range []*Matcher{m.Clone(), m, m} {
			if got, want := x.Allowed(v, nil), x.allowedPlain(v, nil); !slices.Equal(got, want) {
				t.Fatalf("after %q: Allowed differs from Clone+Accept per token", prefix)
			}
			if x.dfa != nil {
				hits += x.dfa.runeHits
			}
		}
	}
	// One matcher fed byte by byte keeps its table from call to call, so
	// the states of both loops, and the half-read sequences that make
	// Allowed walk the whole trie, share one set of keys.
	walker := g.NewMatcher()
	for _, c := range []byte("αaλa中béd😀e!λfωg中g😀gμgαf") {
		if !walker.Accept([]byte{c}) {
			t.Fatalf("byte %q refused", c)
		}
		if got, want := walker.Allowed(v, nil), walker.allowedPlain(v, nil); !slices.Equal(got, want) {
			t.Fatalf("byte by byte, at %q: Allowed differs from Clone+Accept per token", c)
		}
	}
	hits += walker.dfa.runeHits
	if hits == 0 {
		t.Fatal("no transition was taken from the code point shortcut")
	}
}

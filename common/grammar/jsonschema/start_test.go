package jsonschema

import (
	"strings"
	"testing"

	"kvlab/common/grammar"
)

// TestToGBNFStartMatchesToGBNF holds the renamed rules to ToGBNF's: wrapped
// in a root of the caller's own, with a rule of the caller's called like a
// converted one, they accept exactly the good and bad documents of every
// round-trip schema as ToGBNF's grammar does, between the wrapper's brackets.
func TestToGBNFStartMatchesToGBNF(t *testing.T) {
	for _, tc := range roundTrip {
		plain, err := ToGBNF([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		named, err := ToGBNFStart([]byte(tc.schema), "doc")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if strings.Contains(named, "\nroot ::=") || strings.HasPrefix(named, "root ::=") {
			t.Fatalf("%s: the renamed rules still define root:\n%s", tc.name, named)
		}
		gp, err := grammar.Parse(plain)
		if err != nil {
			t.Fatal(err)
		}
		// space and string are names the converter uses too: the caller's
		// must not clash with them.
		gn, err := grammar.Parse("root ::= \"<\" space doc space \">\"\nspace ::= \"_\"?\nstring ::= \"s\"\n" + named)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, named)
		}
		for _, doc := range append(append([]string{}, tc.good...), tc.bad...) {
			want := matches(gp, []byte(doc))
			if got := matches(gn, []byte("<_"+doc+">")); got != want {
				t.Errorf("%s: %s: wrapped grammar accepts=%v, ToGBNF's accepts=%v", tc.name, doc, got, want)
			}
		}
	}
}

// TestToGBNFStartTwoSchemas puts two schemas whose rules have the same names
// (a property "a" of different types) into one grammar.
func TestToGBNFStartTwoSchemas(t *testing.T) {
	a, err := ToGBNFStart([]byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), "one")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ToGBNFStart([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), "two")
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse("root ::= \"1\" one | \"2\" two\n" + a + b)
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]bool{`1{"a": "x"}`: true, `2{"a": 5}`: true, `1{"a": 5}`: false, `2{"a": "x"}`: false} {
		if got := matches(g, []byte(doc)); got != want {
			t.Errorf("%s: accepted=%v, want %v", doc, got, want)
		}
	}
}

func TestToGBNFStartBadName(t *testing.T) {
	for _, n := range []string{"", "1x", "a b", "a_b"} {
		if _, err := ToGBNFStart([]byte(`{}`), n); err == nil {
			t.Errorf("start %q: no error", n)
		}
	}
}

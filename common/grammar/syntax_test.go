package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestSyntaxErrors: each bad grammar fails with a *SyntaxError at the
// 1-based line and column of the offending character, and a message naming
// the problem.
func TestSyntaxErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msg       string
	}{
		{`root ::= foo`, 1, 10, `undefined rule "foo"`},
		{"a ::= \"x\"\n", 2, 1, `no rule "root"`},
		{`root ::= "abc`, 1, 14, "unterminated literal"},
		{`root ::= [abc`, 1, 14, "unterminated character class"},
		{"root ::= \"a\"\nroot ::= \"b\"", 2, 1, `rule "root" defined twice`},
		{`root ::= * "a"`, 1, 10, "nothing before it"},
		{`root ::= "\q"`, 1, 11, `unknown escape \q`},
		{`root ::= "\x4"`, 1, 14, "needs 2 hex digits"},
		{`root ::= ("a" "b"`, 1, 18, "expected ')'"},
		{`root ::= "a" )`, 1, 14, "expected end of rule"},
		{`root = "a"`, 1, 6, "expected ::="},
		{`root ::= "a"{2,1}`, 1, 16, "maximum below minimum"},
		{`root ::= "a"{x}`, 1, 14, "expected a repetition count"},
		{`root ::= "a"{2`, 1, 15, "expected '}'"},
		{"root ::= x\nx ::= x \"a\"", 2, 1, `left recursion in rule "x"`},
		{"root ::= a\na ::= b? a \"c\"\nb ::= \"b\"", 2, 1, `left recursion in rule "a"`},
		{`root ::= ("a"?)*`, 1, 16, `left recursion in rule "root_`},
		{"# comment\nroot ::= (\n  \"a\" |\n  z\n)", 4, 3, `undefined rule "z"`},
		{`root ::= [z-a]`, 1, 10, "reversed"},
		{`root ::= <think>`, 1, 10, "not supported"},
		{"root ::= " + strings.Repeat("(", 300) + `"a"` + strings.Repeat(")", 300), 1, 266, "nest deeper"},
		{"root ::=" + strings.Repeat(` "a"{65536}`, 17), 1, 189, "grammar too large"},
		{"root ::= \"é\" ?? ]", 1, 17, "expected end of rule"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: want *SyntaxError, got %v", c.src, err)
			continue
		}
		if se.Line != c.line || se.Col != c.col || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: got %v, want line %d, column %d: ...%s...", c.src, err, c.line, c.col, c.msg)
		}
	}
}

// TestParseAccepts: the syntax llama.cpp allows, checked by what it matches.
func TestParseAccepts(t *testing.T) {
	cases := []struct {
		src     string
		yes, no []string
	}{
		{`root ::= "a"{3}`, []string{"aaa"}, []string{"aa", "aaaa"}},
		{`root ::= "ab"{2,}`, []string{"abab", "ababab"}, []string{"ab", "aba"}},
		{`root ::= [0-9]{1,3} "x"{0,2}`, []string{"1", "123", "12xx"}, []string{"", "1234", "1xxx"}},
		{`root ::= ("a" | "b")+ "."?`, []string{"abba", "a."}, []string{"", "."}},
		{"root ::= x y # trailing comment\nx ::= \"\\x41\\u00e9\\U0001F600\"\ny ::= [\\[\\]\\\\]", []string{"Aé😀[", "Aé😀\\"}, []string{"Aé😀"}},
		{`root ::= [^a-c\n]`, []string{"d", "é"}, []string{"a", "\n"}},
		{`root ::= . "."`, []string{"\n.", "😀."}, []string{"."}},
		{"root ::=\n  \"a\" |\n  \"b\"\n\n", []string{"a", "b"}, []string{"ab"}},
		{"root ::= \"\" | \"a\"", []string{"", "a"}, []string{"aa"}},
		{"root ::= item+\nitem ::= [a-z] \",\"", []string{"a,b,"}, []string{"a,b"}},
		{"root ::= \"a\"{0}", []string{""}, []string{"a"}},
		{"root ::= \"a\" | | \"b\"", []string{"", "a", "b"}, []string{"ab"}},
		{"root ::= x\r\nx ::= \"a\" # windows line ends\r\n", []string{"a"}, []string{""}},
		{`root ::= [-+] [a-] [\-\^]`, []string{"+a-", "--^"}, []string{"+b-"}},
		{"root ::= (\"a\"{2})*", []string{"", "aa", "aaaa"}, []string{"a", "aaa"}},
	}
	for _, c := range cases {
		g, err := Parse(c.src)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		for _, s := range c.yes {
			if m := g.NewMatcher(); !m.Accept([]byte(s)) || !m.CanEnd() {
				t.Errorf("%q should match %q", c.src, s)
			}
		}
		for _, s := range c.no {
			if m := g.NewMatcher(); m.Accept([]byte(s)) && m.CanEnd() {
				t.Errorf("%q should not match %q", c.src, s)
			}
		}
	}
}

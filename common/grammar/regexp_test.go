package grammar

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// regGen writes one random regular expression twice: as GBNF and as a Go
// regexp, the reference the matcher is held to. Sub-expressions may become
// rules of their own (never recursive, so the language stays regular).
type regGen struct {
	rng   *rand.Rand
	rules []string
}

// runes the random expressions are built from: ASCII, a quote and a
// backslash (escapes), a newline, and two- to four-byte UTF-8.
var regRunes = []rune{'a', 'b', 'c', '"', '\\', '\n', 'é', '☃', '😀', '-', ']'}

func gbnfRune(r rune) string {
	if r < 0x100 {
		return fmt.Sprintf(`\x%02X`, r)
	}
	if r < 0x10000 {
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}

func reRune(r rune) string { return fmt.Sprintf(`\x{%X}`, r) }

// expr returns (gbnf, regexp, nullable).
func (rg *regGen) expr(depth int) (string, string, bool) {
	k := rg.rng.IntN(10)
	if depth <= 0 {
		k = rg.rng.IntN(3)
	}
	switch k {
	case 0: // literal
		n := rg.rng.IntN(3)
		var g, re strings.Builder
		g.WriteByte('"')
		for range n {
			r := regRunes[rg.rng.IntN(len(regRunes))]
			if rg.rng.IntN(2) == 0 && r < 128 && r != '"' && r != '\\' && r != '\n' {
				g.WriteRune(r)
			} else {
				g.WriteString(gbnfRune(r))
			}
			re.WriteString(reRune(r))
		}
		g.WriteByte('"')
		if n == 0 {
			return `""`, `(?:)`, true
		}
		return g.String(), "(?:" + re.String() + ")", false
	case 1: // class
		neg := rg.rng.IntN(3) == 0
		var g, re strings.Builder
		g.WriteByte('[')
		re.WriteByte('[')
		if neg {
			g.WriteByte('^')
			re.WriteByte('^')
		}
		for range 1 + rg.rng.IntN(3) {
			a, b := regRunes[rg.rng.IntN(len(regRunes))], regRunes[rg.rng.IntN(len(regRunes))]
			if a > b {
				a, b = b, a
			}
			g.WriteString(gbnfRune(a))
			re.WriteString(reRune(a))
			if rg.rng.IntN(2) == 0 {
				g.WriteString("-" + gbnfRune(b))
				re.WriteString("-" + reRune(b))
			}
		}
		g.WriteByte(']')
		re.WriteByte(']')
		return g.String(), re.String(), false
	case 2:
		return ".", ".", false
	case 3, 4: // sequence
		g1, r1, n1 := rg.expr(depth - 1)
		g2, r2, n2 := rg.expr(depth - 1)
		return g1 + " " + g2, r1 + r2, n1 && n2
	case 5: // alternation, as a group
		g1, r1, n1 := rg.expr(depth - 1)
		g2, r2, n2 := rg.expr(depth - 1)
		return "(" + g1 + " | " + g2 + ")", "(?:" + r1 + "|" + r2 + ")", n1 || n2
	case 6: // a rule of its own
		g1, r1, n1 := rg.expr(depth - 1)
		name := fmt.Sprintf("r%d", len(rg.rules))
		rg.rules = append(rg.rules, name+" ::= "+g1)
		return name, "(?:" + r1 + ")", n1
	default: // repetition of a group
		g1, r1, n1 := rg.expr(depth - 1)
		ops := []string{"*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}"}
		op := ops[rg.rng.IntN(len(ops))]
		if n1 && (op == "*" || op == "+" || op == "{1,}") {
			op = "?" // a loop over something empty is left recursion
		}
		return "(" + g1 + ")" + op, "(?:" + r1 + ")" + op, n1 || op == "*" || op == "?" || strings.HasPrefix(op, "{0")
	}
}

// TestRegularGrammarsAgreeWithRegexp: for random regular grammars, the
// matcher accepts a whole string exactly when Go's regexp matches it, on
// the grammar's own sentences, their mutations, and random strings.
func TestRegularGrammarsAgreeWithRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var alphabet []byte
	for _, r := range regRunes {
		alphabet = append(alphabet, string(r)...)
	}
	alphabet = append(alphabet, 'x', 0xFF)
	checked, matched := 0, 0
	for gi := range 400 {
		rg := &regGen{rng: rng}
		body, re, _ := rg.expr(4)
		src := strings.Join(append([]string{"root ::= " + body}, rg.rules...), "\n")
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("grammar %d %q: %v", gi, src, err)
		}
		ref := regexp.MustCompile(`(?s)^(?:` + re + `)$`)
		sg := newSentenceGen(g, rng, 20)
		for range 40 {
			var s []byte
			switch rng.IntN(3) {
			case 0:
				s = sg.sentence()
				if !ref.Match(s) {
					t.Fatalf("grammar %q: its sentence %q does not match %s", src, s, ref)
				}
			case 1:
				if rng.IntN(4) == 0 {
					s = mutate(sg.sentence(), alphabet, rng) // may break UTF-8
				} else {
					s = mutateRunes(sg.sentence(), rng)
				}
			case 2:
				for range rng.IntN(6) {
					s = utf8.AppendRune(s, regRunes[rng.IntN(len(regRunes))])
				}
			}
			m := g.NewMatcher()
			got := acceptSplit(m, s, rng) && m.CanEnd()
			// regexp reads bad UTF-8 as U+FFFD; the matcher refuses it.
			if want := ref.Match(s) && utf8.Valid(s); got != want {
				t.Fatalf("grammar %q\nregexp %s\n%q: matcher %v, regexp %v", src, ref, s, got, want)
			}
			checked++
			if got {
				matched++
			}
		}
	}
	t.Logf("%d strings checked, %d in the language", checked, matched)
	if matched < checked/4 || matched > checked*3/4 {
		t.Fatalf("the cases are lopsided: %d of %d match", matched, checked)
	}
}

// mutateRunes inserts, deletes or replaces a few whole code points.
func mutateRunes(b []byte, rng *rand.Rand) []byte {
	s := []rune(string(b))
	for k := rng.IntN(3); k >= 0; k-- {
		i := rng.IntN(len(s) + 1)
		r := regRunes[rng.IntN(len(regRunes))]
		switch rng.IntN(3) {
		case 0:
			s = append(s[:i], append([]rune{r}, s[i:]...)...)
		case 1:
			if i < len(s) {
				s = append(s[:i], s[i+1:]...)
			}
		case 2:
			if i < len(s) {
				s[i] = r
			}
		}
	}
	return []byte(string(s))
}

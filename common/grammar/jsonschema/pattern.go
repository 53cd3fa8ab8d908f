package jsonschema

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The pattern translator turns the regular-expression subset llama.cpp
// translates (literals, classes, groups, alternation, ? * + {m,n}, ^ and $)
// into GBNF over the JSON spelling of the string: a character the pattern
// names is matched as JSON writes it (a quote as \", a newline as \n), and
// an unanchored side is padded with any JSON string characters.

type rerange struct{ lo, hi rune }

// maxGroupDepth bounds how deep a pattern's groups nest (each is a level of
// parentheses in the grammar, whose parser bounds nesting too).
const maxGroupDepth = 64

type patternParser struct {
	src []rune
	i   int
	c   *converter
	ptr string
	// nullable says whether what the last call parsed can match the empty
	// string: repeating such a thing is refused (GBNF cannot repeat it).
	nullable bool
	depth    int // groups open
}

// pattern emits the rule of a string matching re, under name rn.
func (c *converter) pattern(re, rn, ptr string) string {
	p := &patternParser{src: []rune(re), c: c, ptr: ptr}
	body := p.alternation(true)
	if p.i < len(p.src) {
		p.fail("unbalanced )")
	}
	if body == "" {
		return c.addRule(rn, `"\"" "\""`)
	}
	return c.addRule(rn, `"\"" (`+body+`) "\""`)
}

func (p *patternParser) fail(format string, args ...any) {
	fail(p.ptr, "pattern", "pattern %s: %s (at offset %d)", quoteJSON(string(p.src)), fmt.Sprintf(format, args...), p.i)
}

func (p *patternParser) peek() (rune, bool) {
	if p.i < len(p.src) {
		return p.src[p.i], true
	}
	return 0, false
}

// alternation parses branches up to ")" or the end; at the top level each
// branch may carry its own ^ and $.
func (p *patternParser) alternation(top bool) string {
	var alts []string
	empty, nullable := false, false
	for {
		s := p.sequence(top)
		nullable = nullable || p.nullable
		if s == "" {
			empty = true
		} else {
			alts = append(alts, s)
		}
		if r, ok := p.peek(); ok && r == '|' {
			p.i++
			continue
		}
		break
	}
	p.nullable = nullable
	if len(alts) == 0 {
		return ""
	}
	body := strings.Join(alts, " | ")
	if empty {
		return "(" + body + ")?"
	}
	return body
}

func (p *patternParser) sequence(top bool) string {
	var items []string
	nullable := true
	anchoredStart, anchoredEnd := false, false
	if top {
		if r, ok := p.peek(); ok && r == '^' {
			p.i++
			anchoredStart = true
		}
	}
	for {
		r, ok := p.peek()
		if !ok || r == '|' || r == ')' {
			break
		}
		if r == '$' {
			p.i++
			if n, ok := p.peek(); top && (!ok || n == '|') {
				anchoredEnd = true
				break
			}
			p.i--
			p.fail("$ is supported only at the end of a branch")
		}
		if r == '^' {
			p.fail("^ is supported only at the start of a branch")
		}
		atom := p.atom()
		items = append(items, p.quantified(atom))
		nullable = nullable && p.nullable
	}
	p.nullable = nullable
	if top && !anchoredStart {
		items = append([]string{p.c.addBuiltin("char", "char") + "*"}, items...)
	}
	if top && !anchoredEnd {
		items = append(items, p.c.addBuiltin("char", "char")+"*")
	}
	if len(items) == 0 {
		return ""
	}
	s := strings.Join(items, " ")
	if top {
		return "(" + s + ")"
	}
	return s
}

// atom parses one unit and returns it as a single GBNF primary.
func (p *patternParser) atom() string {
	r := p.src[p.i]
	p.nullable = false
	switch r {
	case '(':
		p.i++
		if n, ok := p.peek(); ok && n == '?' {
			if p.i+1 < len(p.src) && p.src[p.i+1] == ':' {
				p.i += 2
			} else {
				p.fail("lookarounds, named groups and flags are not supported")
			}
		}
		if p.depth++; p.depth > maxGroupDepth {
			p.fail("groups nest deeper than %d", maxGroupDepth)
		}
		body := p.alternation(false) // sets p.nullable for the group
		p.depth--
		if n, ok := p.peek(); !ok || n != ')' {
			p.fail("unbalanced (")
		}
		p.i++
		if body == "" {
			return `""`
		}
		return "(" + body + ")"
	case '[':
		return p.class()
	case '.':
		p.i++
		return p.c.addRule("dot", `[^"\\\x00-\x1F\x7F\u2028\u2029\x0A\x0D]`)
	case '*', '+', '?', '{':
		p.fail("nothing to repeat")
	case '\\':
		p.i++
		if set, neg, ok := p.classEscape(); ok {
			return emitClass(set, neg)
		}
		return literal(p.escapedRune())
	}
	p.i++
	return literal(r)
}

// quantified applies a quantifier after atom, if one follows.
func (p *patternParser) quantified(atom string) string {
	r, ok := p.peek()
	if !ok {
		return atom
	}
	if (r == '*' || r == '+' || r == '?' || r == '{') && p.nullable {
		p.fail("repeating something that can match nothing is not supported")
	}
	var out string
	switch r {
	case '*', '+', '?':
		p.i++
		out = atom + string(r)
		p.nullable = r != '+'
	case '{':
		end := p.i
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			p.fail("unterminated {")
		}
		spec := string(p.src[p.i+1 : end])
		lo, hi, ok := parseCount(spec)
		if !ok {
			p.fail("invalid quantifier {%s}", spec)
		}
		p.i = end + 1
		p.nullable = lo == 0
		switch {
		case hi < 0:
			out = fmt.Sprintf("%s{%d,}", atom, lo)
		case lo == hi:
			out = fmt.Sprintf("%s{%d}", atom, lo)
		default:
			out = fmt.Sprintf("%s{%d,%d}", atom, lo, hi)
		}
	default:
		return atom
	}
	if n, ok := p.peek(); ok && n == '?' {
		p.i++ // a lazy quantifier matches the same strings when the match is whole
	}
	if n, ok := p.peek(); ok && (n == '*' || n == '+' || n == '?' || n == '{') {
		p.fail("nested quantifier")
	}
	return "(" + out + ")"
}

func parseCount(spec string) (lo, hi int, ok bool) {
	parts := strings.Split(spec, ",")
	num := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n <= 1000
	}
	switch len(parts) {
	case 1:
		n, ok := num(parts[0])
		return n, n, ok
	case 2:
		lo, ok := num(parts[0])
		if !ok {
			return 0, 0, false
		}
		if parts[1] == "" {
			return lo, -1, true
		}
		hi, ok := num(parts[1])
		return lo, hi, ok && lo <= hi
	}
	return 0, 0, false
}

// classEscape reads \d \w \s (and their negations) after a backslash.
func (p *patternParser) classEscape() ([]rerange, bool, bool) {
	if p.i >= len(p.src) {
		p.fail("trailing backslash")
	}
	var set []rerange
	switch p.src[p.i] {
	case 'd', 'D':
		set = []rerange{{'0', '9'}}
	case 'w', 'W':
		set = []rerange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	case 's', 'S':
		set = []rerange{{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}
	default:
		return nil, false, false
	}
	neg := p.src[p.i] >= 'A' && p.src[p.i] <= 'Z'
	p.i++
	return set, neg, true
}

// escapedRune reads the character a backslash escape stands for.
func (p *patternParser) escapedRune() rune {
	if p.i >= len(p.src) {
		p.fail("trailing backslash")
	}
	r := p.src[p.i]
	p.i++
	switch r {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'f':
		return '\f'
	case 'v':
		return '\v'
	case 'x', 'u':
		n := 2
		if r == 'u' {
			n = 4
		}
		if p.i+n > len(p.src) {
			p.fail("short \\%c escape", r)
		}
		v, err := strconv.ParseUint(string(p.src[p.i:p.i+n]), 16, 32)
		if err != nil {
			p.fail("bad \\%c escape", r)
		}
		p.i += n
		return rune(v)
	}
	if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
		p.i--
		p.fail("escape \\%c is not supported", r)
	}
	return r
}

// class parses [...] into a GBNF primary.
func (p *patternParser) class() string {
	p.i++ // [
	neg := false
	if n, ok := p.peek(); ok && n == '^' {
		neg = true
		p.i++
	}
	var set []rerange
	first := true
	for {
		r, ok := p.peek()
		if !ok {
			p.fail("unterminated [")
		}
		if r == ']' && !first {
			p.i++
			break
		}
		if r == ']' {
			p.fail("empty class")
		}
		first = false
		var lo rune
		if r == '\\' {
			p.i++
			if sub, subNeg, ok := p.classEscape(); ok {
				if subNeg {
					p.fail("negated class escapes inside a class are not supported")
				}
				set = append(set, sub...)
				continue
			}
			lo = p.escapedRune()
		} else {
			if r == '[' {
				p.fail("nested classes are not supported")
			}
			lo = r
			p.i++
		}
		hi := lo
		if p.i+1 < len(p.src) && p.src[p.i] == '-' && p.src[p.i+1] != ']' {
			p.i++
			h := p.src[p.i]
			if h == '\\' {
				p.i++
				if _, _, ok := p.classEscape(); ok {
					p.fail("a class escape cannot end a range")
				}
				hi = p.escapedRune()
			} else {
				hi = h
				p.i++
			}
			if hi < lo {
				p.fail("range out of order")
			}
		}
		set = append(set, rerange{lo, hi})
	}
	return emitClass(set, neg)
}

// special runes are those a JSON string cannot hold raw.
func special(r rune) bool { return r < 0x20 || r == '"' || r == '\\' || r == 0x7F }

// emitClass is a GBNF primary matching the JSON spelling of one character
// of set (or, negated, of one character outside it).
func emitClass(set []rerange, neg bool) string {
	sort.Slice(set, func(i, j int) bool { return set[i].lo < set[j].lo })
	if neg {
		var b strings.Builder
		b.WriteString("[^")
		for _, r := range set {
			b.WriteString(classRange(r))
		}
		b.WriteString(`"\\\x00-\x1F\x7F\u2028\u2029]`)
		return b.String()
	}
	var safe []rerange
	var lits []string
	for _, r := range set {
		start := r.lo
		for x := r.lo; x <= r.hi; x++ {
			if special(x) {
				if start < x {
					safe = append(safe, rerange{start, x - 1})
				}
				lits = append(lits, literal(x))
				start = x + 1
			}
			if x >= 0x80 { // no specials above 0x7F
				break
			}
		}
		if start <= r.hi {
			safe = append(safe, rerange{start, r.hi})
		}
	}
	var parts []string
	if len(safe) > 0 {
		var b strings.Builder
		b.WriteString("[")
		for _, r := range safe {
			b.WriteString(classRange(r))
		}
		b.WriteString("]")
		parts = append(parts, b.String())
	}
	parts = append(parts, lits...)
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " | ") + ")"
}

func classRange(r rerange) string {
	if r.lo == r.hi {
		return classChar(r.lo)
	}
	return classChar(r.lo) + "-" + classChar(r.hi)
}

// classChar is r spelled inside a GBNF character class.
func classChar(r rune) string {
	switch {
	case r >= 0x20 && r < 0x7F && !strings.ContainsRune(`]\-^["`, r):
		return string(r)
	case r < 0x80:
		return fmt.Sprintf(`\x%02X`, r)
	case r <= 0xFFFF:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}

// literal is a GBNF literal matching r as a JSON string spells it.
func literal(r rune) string {
	if !utf8.ValidRune(r) {
		r = utf8.RuneError
	}
	var js string
	switch r {
	case '"':
		js = `\"`
	case '\\':
		js = `\\`
	case '\n':
		js = `\n`
	case '\r':
		js = `\r`
	case '\t':
		js = `\t`
	case '\b':
		js = `\b`
	case '\f':
		js = `\f`
	default:
		if r < 0x20 || r == 0x7F {
			js = fmt.Sprintf(`\u%04x`, r)
		} else {
			js = string(r)
		}
	}
	return formatLiteral(js)
}

package grammar

import (
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// SyntaxError is what Parse returns for a grammar it cannot accept: the
// 1-based line and column (in characters) of the offending character, so an
// HTTP 400 can point the user at the exact spot.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

// Error formats the position the way editors count: "line L, column C: msg".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// elemKind tells what one element of a compiled alternative is.
type elemKind uint8

const (
	elemEnd  elemKind = iota // end of an alternative: pop the stack
	elemChar                 // one code point out of a class
	elemRef                  // a reference to a rule
)

// elem is one position of the flat program: every alternative of every rule
// is a run of elems closed by an elemEnd, so a position is one int32.
type elem struct {
	kind elemKind
	arg  int32 // rule id for elemRef, class id for elemChar
}

// class is a set of code points: sorted, merged, inclusive ranges, with a
// bitmap for ASCII so the common case is one shift and mask.
type class struct {
	ascii  [2]uint64
	ranges []rune // lo0, hi0, lo1, hi1, ...
}

func newClass(ranges []rune, negated bool) *class {
	type pair struct{ lo, hi rune }
	ps := make([]pair, 0, len(ranges)/2)
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if lo > hi {
			continue
		}
		ps = append(ps, pair{lo, hi})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].lo < ps[j].lo })
	var merged []pair
	for _, p := range ps {
		if n := len(merged); n > 0 && p.lo <= merged[n-1].hi+1 {
			if p.hi > merged[n-1].hi {
				merged[n-1].hi = p.hi
			}
			continue
		}
		merged = append(merged, p)
	}
	if negated {
		var comp []pair
		next := rune(0)
		for _, p := range merged {
			if p.lo > next {
				comp = append(comp, pair{next, p.lo - 1})
			}
			next = p.hi + 1
		}
		if next <= utf8.MaxRune {
			comp = append(comp, pair{next, utf8.MaxRune})
		}
		merged = comp
	}
	c := &class{}
	for _, p := range merged {
		c.ranges = append(c.ranges, p.lo, p.hi)
		for r := p.lo; r <= p.hi && r < 128; r++ {
			c.ascii[r>>6] |= 1 << (r & 63)
		}
	}
	return c
}

// has reports whether r is in the class.
func (c *class) has(r rune) bool {
	if r < 128 {
		return c.ascii[r>>6]&(1<<(r&63)) != 0
	}
	rs := c.ranges
	i := sort.Search(len(rs)/2, func(i int) bool { return rs[2*i+1] >= r })
	return i < len(rs)/2 && rs[2*i] <= r
}

// live reports whether the class holds a code point UTF-8 can encode (not
// only surrogates, not nothing).
func (c *class) live() bool {
	for i := 0; i < len(c.ranges); i += 2 {
		if c.ranges[i] < 0xD800 || c.ranges[i+1] > 0xDFFF {
			return true
		}
	}
	return false
}

// overlaps reports whether any code point in [lo, hi] is in the class; it
// lets a matcher reject a UTF-8 prefix before the sequence is complete.
func (c *class) overlaps(lo, hi rune) bool {
	rs := c.ranges
	i := sort.Search(len(rs)/2, func(i int) bool { return rs[2*i+1] >= lo })
	return i < len(rs)/2 && rs[2*i] <= hi
}

// Grammar is a parsed GBNF grammar compiled to a flat program of positions.
// The program is immutable and the position masks its matchers fill are
// kept under a lock, so a Grammar is safe to share between goroutines;
// each generation gets its own Matcher.
type Grammar struct {
	elems   []elem
	classes []*class
	rules   [][]int32 // rule id -> start position of each alternative
	names   []string  // rule id -> name (generated rules: parent_N)
	root    int32
	// popMark is a hidden position after the program, a character
	// position whose class is empty, that no rule refers to: the position
	// masks put it under a stack's top frames to see where a token pops
	// out of them (position.go). Matching never reaches it.
	popMark   int32
	positions positionCache
}

// Rules returns the number of rules after repetitions and groups were turned
// into rules of their own (the size of the compiled grammar).
func (g *Grammar) Rules() int { return len(g.rules) }

// The parse tree before compilation: a rule is alternatives of sequences of
// symbols; repetition and groups become generated rules as in llama.cpp.
type symbol struct {
	kind  elemKind // elemChar or elemRef
	cls   *class
	rule  int32
	line  int
	col   int
	undef bool
}

// Bounds on what one grammar may cost to compile: how deep parentheses
// nest (the parser recurses on them) and how many elements the program may
// have once repetitions like x{1000} are written out.
const (
	maxNesting = 256
	maxElems   = 1 << 20
)

type parser struct {
	size  int // symbols written so far, repetitions expanded
	nest  int
	src   string
	pos   int
	line  int
	col   int // 1-based, counted in code points
	names []string
	ids   map[string]int32
	alts  [][][]symbol // rule id -> alternatives -> sequence
	def   []bool
	defAt [][2]int
	refAt map[int32][2]int
}

func (p *parser) errAt(line, col int, format string, args ...any) error {
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) errf(format string, args ...any) error {
	return p.errAt(p.line, p.col, format, args...)
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) peek() byte {
	if p.pos >= len(p.src) {
		return 0
	}
	return p.src[p.pos]
}

func (p *parser) peekAt(k int) byte {
	if p.pos+k >= len(p.src) {
		return 0
	}
	return p.src[p.pos+k]
}

// advance consumes one code point and keeps line and column current.
func (p *parser) advance() rune {
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	if r == '\n' {
		p.line++
		p.col = 1
	} else {
		p.col++
	}
	return r
}

// space skips blanks and comments; newlines only when newlineOK (between
// rules, after '|', and inside parentheses), as llama.cpp does.
func (p *parser) space(newlineOK bool) {
	for !p.eof() {
		switch c := p.peek(); {
		case c == ' ' || c == '\t':
			p.advance()
		case c == '#':
			for !p.eof() && p.peek() != '\n' && p.peek() != '\r' {
				p.advance()
			}
		case (c == '\n' || c == '\r') && newlineOK:
			p.advance()
		default:
			return
		}
	}
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *parser) name() string {
	start := p.pos
	for !p.eof() && isNameChar(p.peek()) {
		p.advance()
	}
	return p.src[start:p.pos]
}

func (p *parser) ruleID(name string) int32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := int32(len(p.names))
	p.ids[name] = id
	p.names = append(p.names, name)
	p.alts = append(p.alts, nil)
	p.def = append(p.def, false)
	p.defAt = append(p.defAt, [2]int{})
	return id
}

// newRule makes a generated rule (for a group or a repetition) named after
// the rule it appears in, like llama.cpp's "root_3".
func (p *parser) newRule(parent int32) int32 {
	base := p.names[parent]
	for i := len(p.names); ; i++ {
		name := base + "_" + strconv.Itoa(i)
		if _, ok := p.ids[name]; !ok {
			id := p.ruleID(name)
			p.def[id] = true
			p.defAt[id] = [2]int{p.line, p.col}
			return id
		}
	}
}

// Parse parses llama.cpp's GBNF; the start rule is "root". Errors are
// *SyntaxError: undefined rules, a missing root, and left recursion (which
// would make matching loop forever) are reported like syntax errors. The
// last few grammars parsed are kept by their text (parsecache.go): the
// same text gives the same *Grammar, so requests that send one grammar
// share its position masks.
func Parse(src string) (*Grammar, error) {
	if g := recentGrammar(src); g != nil {
		return g, nil
	}
	g, err := parse(src)
	if err == nil {
		keepGrammar(src, g)
	}
	return g, err
}

// parse is Parse without the cache of recent grammars.
func parse(src string) (*Grammar, error) {
	p := &parser{src: src, line: 1, col: 1, ids: map[string]int32{}, refAt: map[int32][2]int{}}
	p.space(true)
	for !p.eof() {
		if err := p.rule(); err != nil {
			return nil, err
		}
		p.space(true)
	}
	for id, ok := range p.def {
		if !ok {
			at := p.refAt[int32(id)]
			return nil, p.errAt(at[0], at[1], "undefined rule %q", p.names[id])
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return nil, p.errAt(p.line, p.col, "grammar has no rule \"root\"")
	}
	g := p.compile(root)
	if err := p.checkLeftRecursion(g); err != nil {
		return nil, err
	}
	return g, nil
}

func (p *parser) rule() error {
	line, col := p.line, p.col
	name := p.name()
	if name == "" {
		return p.errf("expected a rule name, found %q", p.peekRune())
	}
	p.space(false)
	if !(p.peek() == ':' && p.peekAt(1) == ':' && p.peekAt(2) == '=') {
		return p.errf("expected ::= after rule name %q", name)
	}
	p.advance()
	p.advance()
	p.advance()
	p.space(true)
	id := p.ruleID(name)
	if p.def[id] {
		return p.errAt(line, col, "rule %q defined twice", name)
	}
	p.def[id] = true
	p.defAt[id] = [2]int{line, col}
	alts, err := p.alternatives(id, false)
	if err != nil {
		return err
	}
	p.alts[id] = alts
	if p.eof() {
		return nil
	}
	if p.peek() == '\r' {
		p.advance()
	}
	if p.peek() != '\n' {
		return p.errf("expected end of rule, found %q", p.peekRune())
	}
	return nil
}

func (p *parser) peekRune() string {
	if p.eof() {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return string(r)
}

func (p *parser) alternatives(rule int32, nested bool) ([][]symbol, error) {
	var alts [][]symbol
	for {
		seq, err := p.sequence(rule, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.peek() != '|' {
			return alts, nil
		}
		p.advance()
		p.space(true)
	}
}

// sequence parses symbols until '|', ')' or the end of the rule. A
// repetition operator applies to the last symbol, which for a literal is
// the whole literal (as in llama.cpp).
func (p *parser) sequence(rule int32, nested bool) ([]symbol, error) {
	var seq []symbol
	last := -1 // start of the last symbol in seq
	for !p.eof() {
		c := p.peek()
		line, col := p.line, p.col
		switch {
		case c == '"':
			p.advance()
			last = len(seq)
			for {
				if p.eof() {
					return nil, p.errf("unterminated literal")
				}
				if p.peek() == '"' {
					p.advance()
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				seq = append(seq, symbol{kind: elemChar, cls: newClass([]rune{r, r}, false)})
			}
		case c == '[':
			p.advance()
			last = len(seq)
			neg := false
			if p.peek() == '^' {
				p.advance()
				neg = true
			}
			var ranges []rune
			for {
				if p.eof() {
					return nil, p.errf("unterminated character class")
				}
				if p.peek() == ']' {
					p.advance()
					break
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.peek() == '-' && p.peekAt(1) != ']' && p.peekAt(1) != 0 {
					p.advance()
					if hi, err = p.char(); err != nil {
						return nil, err
					}
					if hi < lo {
						return nil, p.errAt(line, col, "character range %q-%q is reversed", lo, hi)
					}
				}
				ranges = append(ranges, lo, hi)
			}
			seq = append(seq, symbol{kind: elemChar, cls: newClass(ranges, neg)})
		case c == '.':
			p.advance()
			last = len(seq)
			seq = append(seq, symbol{kind: elemChar, cls: newClass(nil, true)})
		case isNameChar(c):
			name := p.name()
			id := p.ruleID(name)
			if _, ok := p.refAt[id]; !ok {
				p.refAt[id] = [2]int{line, col}
			}
			last = len(seq)
			seq = append(seq, symbol{kind: elemRef, rule: id, line: line, col: col})
		case c == '(':
			if p.nest >= maxNesting {
				return nil, p.errf("parentheses nest deeper than %d", maxNesting)
			}
			p.advance()
			p.space(true)
			sub := p.newRule(rule)
			p.nest++
			alts, err := p.alternatives(rule, true)
			p.nest--
			if err != nil {
				return nil, err
			}
			p.alts[sub] = alts
			if p.peek() != ')' {
				return nil, p.errf("expected ')', found %q", p.peekRune())
			}
			p.advance()
			last = len(seq)
			seq = append(seq, symbol{kind: elemRef, rule: sub, line: line, col: col})
		case c == '*' || c == '+' || c == '?' || c == '{':
			if last < 0 {
				return nil, p.errf("%q has nothing before it to repeat", string(c))
			}
			lo, hi, err := p.repetition()
			if err != nil {
				return nil, err
			}
			body := append([]symbol(nil), seq[last:]...)
			seq = seq[:last]
			first := len(p.names)
			width := min(len(body), 1) // a longer body becomes one rule
			if p.size += width * max(lo, hi); p.size > maxElems {
				return nil, p.errAt(line, col, "grammar too large: repetitions expand past %d elements", maxElems)
			}
			seq = append(seq, p.repeat(rule, body, lo, hi)...)
			for id := first; id < len(p.names); id++ {
				p.defAt[id] = [2]int{line, col} // errors point at the operator
			}
			if len(seq) == last {
				last = -1 // x{0}: nothing left to repeat
			}
		case c == '<' || c == '!':
			return nil, p.errf("token matches (<...>) are not supported")
		default:
			return seq, nil
		}
		p.space(nested)
	}
	return seq, nil
}

// repetition parses * + ? {m} {m,} {m,n}; hi < 0 means unbounded.
func (p *parser) repetition() (lo, hi int, err error) {
	switch p.advance() {
	case '*':
		return 0, -1, nil
	case '+':
		return 1, -1, nil
	case '?':
		return 0, 1, nil
	}
	p.space(false)
	num := func() (int, bool) {
		start := p.pos
		for p.peek() >= '0' && p.peek() <= '9' {
			p.advance()
		}
		if start == p.pos {
			return 0, false
		}
		n, err := strconv.Atoi(p.src[start:p.pos])
		return n, err == nil && n <= 1<<16
	}
	line, col := p.line, p.col
	lo, ok := num()
	if !ok {
		return 0, 0, p.errAt(line, col, "expected a repetition count")
	}
	p.space(false)
	hi = lo
	if p.peek() == ',' {
		p.advance()
		p.space(false)
		hi = -1
		if p.peek() != '}' {
			line, col = p.line, p.col
			if hi, ok = num(); !ok {
				return 0, 0, p.errAt(line, col, "expected a repetition count")
			}
			if hi < lo {
				return 0, 0, p.errAt(line, col, "repetition {%d,%d}: maximum below minimum", lo, hi)
			}
			p.space(false)
		}
	}
	if p.peek() != '}' {
		return 0, 0, p.errf("expected '}', found %q", p.peekRune())
	}
	p.advance()
	return lo, hi, nil
}

// repeat expands body{lo,hi} the way llama.cpp does: lo copies, then either
// a rule R ::= body R | "" (unbounded) or hi-lo nested optional rules.
func (p *parser) repeat(rule int32, body []symbol, lo, hi int) []symbol {
	if len(body) > 1 && (lo != 1 || hi != 1) {
		sub := p.newRule(rule)
		p.alts[sub] = [][]symbol{body}
		body = []symbol{{kind: elemRef, rule: sub}}
	}
	var out []symbol
	for i := 0; i < lo; i++ {
		out = append(out, body...)
	}
	if hi < 0 {
		r := p.newRule(rule)
		p.alts[r] = [][]symbol{append(append([]symbol(nil), body...), symbol{kind: elemRef, rule: r}), nil}
		return append(out, symbol{kind: elemRef, rule: r})
	}
	var tail []symbol // (body (body ...)?)?
	for i := lo; i < hi; i++ {
		r := p.newRule(rule)
		p.alts[r] = [][]symbol{append(append([]symbol(nil), body...), tail...), nil}
		tail = []symbol{{kind: elemRef, rule: r}}
	}
	return append(out, tail...)
}

// char reads one character of a literal or class, with escapes.
func (p *parser) char() (rune, error) {
	line, col := p.line, p.col
	r := p.advance()
	if r == utf8.RuneError {
		return 0, p.errAt(line, col, "invalid UTF-8")
	}
	if r != '\\' {
		return r, nil
	}
	if p.eof() {
		return 0, p.errAt(line, col, "escape at end of input")
	}
	e := p.advance()
	hex := 0
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^':
		return e, nil
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	default:
		return 0, p.errAt(line, col, "unknown escape \\%c", e)
	}
	var v rune
	for i := 0; i < hex; i++ {
		c := p.peek()
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errf("escape \\%c needs %d hex digits", e, hex)
		}
		p.advance()
		v = v<<4 | rune(d)
	}
	if v > utf8.MaxRune {
		return 0, p.errAt(line, col, "code point %#x is beyond Unicode", v)
	}
	return v, nil
}

// compile flattens the rules into one program: alternative starts per rule,
// each alternative closed by elemEnd.
func (p *parser) compile(root int32) *Grammar {
	g := &Grammar{names: p.names, root: root, rules: make([][]int32, len(p.names))}
	classID := map[*class]int32{}
	for id, alts := range p.alts {
		for _, seq := range alts {
			g.rules[id] = append(g.rules[id], int32(len(g.elems)))
			for _, s := range seq {
				if s.kind == elemRef {
					g.elems = append(g.elems, elem{kind: elemRef, arg: s.rule})
					continue
				}
				cid, ok := classID[s.cls]
				if !ok {
					cid = int32(len(g.classes))
					classID[s.cls] = cid
					g.classes = append(g.classes, s.cls)
				}
				g.elems = append(g.elems, elem{kind: elemChar, arg: cid})
			}
			g.elems = append(g.elems, elem{kind: elemEnd})
		}
	}
	g.popMark = int32(len(g.elems))
	g.classes = append(g.classes, newClass(nil, false))
	g.elems = append(g.elems, elem{kind: elemChar, arg: int32(len(g.classes) - 1)}, elem{kind: elemEnd})
	return g
}

// checkLeftRecursion refuses a rule that can reach itself without consuming
// a character: expanding it would push forever. Generated rules are named
// after the rule they came from (e.g. "root_4" for a repetition of
// something that can match nothing).
func (p *parser) checkLeftRecursion(g *Grammar) error {
	n := len(g.rules)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for id, alts := range g.rules {
			if nullable[id] {
				continue
			}
			for _, start := range alts {
				ok := true
				for pos := start; g.elems[pos].kind != elemEnd; pos++ {
					e := g.elems[pos]
					if e.kind == elemChar || !nullable[e.arg] {
						ok = false
						break
					}
				}
				if ok {
					nullable[id] = true
					changed = true
					break
				}
			}
		}
	}
	// left[id]: rules reachable at the left edge of id.
	left := make([][]int32, n)
	for id, alts := range g.rules {
		for _, start := range alts {
			for pos := start; g.elems[pos].kind == elemRef; pos++ {
				e := g.elems[pos]
				left[id] = append(left[id], e.arg)
				if !nullable[e.arg] {
					break
				}
			}
		}
	}
	state := make([]uint8, n) // 0 new, 1 on path, 2 done
	var visit func(id int32) int32
	visit = func(id int32) int32 {
		state[id] = 1
		for _, to := range left[id] {
			switch state[to] {
			case 1:
				return to
			case 0:
				if r := visit(to); r >= 0 {
					return r
				}
			}
		}
		state[id] = 2
		return -1
	}
	for id := int32(0); id < int32(n); id++ {
		if state[id] == 0 {
			if r := visit(id); r >= 0 {
				at := p.defAt[r]
				return p.errAt(at[0], at[1], "left recursion in rule %q: it can reach itself without matching a character", p.names[r])
			}
		}
	}
	return nil
}

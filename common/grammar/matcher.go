package grammar

import (
	"errors"
	"unicode/utf8"
)

// MaxStacks bounds the stacks one Matcher may hold at once. An ambiguous
// grammar (nested repetitions such as ("a"*)*-like shapes, x? x? x? ...)
// can multiply its stacks with every character; past this bound Accept
// refuses the bytes (returns false, the matcher unchanged) and Err says why,
// so a hostile grammar costs bounded memory and time per byte.
const MaxStacks = 4096

// ErrTooManyStacks is what Err reports after Accept refused bytes because
// they would have grown the stack set past MaxStacks.
var ErrTooManyStacks = errors.New("grammar: too many parse stacks (ambiguous grammar)")

// node is one frame of a parse stack: a position in the program. Stacks are
// immutable linked lists so advancing shares the tail; hash and depth let
// two stacks be compared without walking them in the usual case.
type node struct {
	pos   int32
	depth int32
	hash  uint64
	next  *node
}

func push(pos int32, next *node) *node {
	h, d := uint64(0x9e3779b97f4a7c15), int32(1)
	if next != nil {
		h, d = next.hash, next.depth+1
	}
	h ^= uint64(pos) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	h *= 0xff51afd7ed558ccd
	return &node{pos: pos, depth: d, hash: h, next: next}
}

func sameStack(a, b *node) bool {
	for a != b {
		if a == nil || b == nil || a.pos != b.pos || a.hash != b.hash || a.depth != b.depth {
			return false
		}
		a, b = a.next, b.next
	}
	return true
}

// stackSet collects the stacks of one step without duplicates. A nil stack
// is the empty one: the whole input so far is a sentence.
type stackSet struct {
	s     []*node
	index map[uint64][]int32
	err   error
}

func (ss *stackSet) add(n *node) {
	if ss.err != nil {
		return
	}
	var h uint64
	if n != nil {
		h = n.hash
	}
	if ss.index == nil && len(ss.s) < 32 {
		for _, o := range ss.s {
			if (o == nil) == (n == nil) && (n == nil || o.hash == h) && sameStack(o, n) {
				return
			}
		}
	} else {
		if ss.index == nil {
			ss.index = make(map[uint64][]int32, 64)
			for i, o := range ss.s {
				var oh uint64
				if o != nil {
					oh = o.hash
				}
				ss.index[oh] = append(ss.index[oh], int32(i))
			}
		}
		for _, i := range ss.index[h] {
			if sameStack(ss.s[i], n) {
				return
			}
		}
		ss.index[h] = append(ss.index[h], int32(len(ss.s)))
	}
	if len(ss.s) >= MaxStacks {
		ss.err = ErrTooManyStacks
		return
	}
	ss.s = append(ss.s, n)
}

// expand brings a stack to a character position (or empty): references push
// their rule's alternatives, ends pop. A continuation that is only an end is
// not pushed, so a rule's last reference is a tail call.
func (g *Grammar) expand(n *node, out *stackSet) {
	for {
		if n == nil {
			out.add(nil)
			return
		}
		e := g.elems[n.pos]
		switch e.kind {
		case elemChar:
			out.add(n)
			return
		case elemEnd:
			n = n.next
		case elemRef:
			base := n.next
			if g.elems[n.pos+1].kind != elemEnd {
				base = push(n.pos+1, n.next)
			}
			alts := g.rules[e.arg]
			for _, a := range alts[:len(alts)-1] {
				g.expand(push(a, base), out)
			}
			n = push(alts[len(alts)-1], base)
		}
	}
}

// step advances every stack over code point r.
func (g *Grammar) step(stacks []*node, r rune, out *stackSet) {
	for _, n := range stacks {
		if n == nil || !g.classes[g.elems[n.pos].arg].has(r) {
			continue
		}
		if g.elems[n.pos+1].kind == elemEnd {
			g.expand(n.next, out)
		} else {
			g.expand(push(n.pos+1, n.next), out)
		}
	}
}

// viable reports whether some stack can take a code point in [lo, hi]: the
// check for a UTF-8 sequence that has not been completed yet.
func (g *Grammar) viable(stacks []*node, lo, hi rune) bool {
	for _, n := range stacks {
		if n != nil && g.classes[g.elems[n.pos].arg].overlaps(lo, hi) {
			return true
		}
	}
	return false
}

// state is what a Matcher holds: the stacks and the bytes of a code point
// that has started but not finished.
type state struct {
	stacks []*node
	pend   [4]byte
	npend  uint8
	need   uint8
}

// seqLen is the length of a UTF-8 sequence from its first byte (0: the byte
// cannot start one).
func seqLen(b byte) uint8 {
	switch {
	case b < 0x80:
		return 1
	case b >= 0xC2 && b <= 0xDF:
		return 2
	case b >= 0xE0 && b <= 0xEF:
		return 3
	case b >= 0xF0 && b <= 0xF4:
		return 4
	}
	return 0
}

// prefixRange is the range of code points a valid UTF-8 sequence starting
// with p can still encode.
func prefixRange(p []byte, need uint8) (lo, hi rune) {
	var lob, hib [4]byte
	copy(lob[:], p)
	copy(hib[:], p)
	for i := len(p); i < int(need); i++ {
		lob[i], hib[i] = 0x80, 0xBF
	}
	lo, _ = utf8.DecodeRune(lob[:need])
	hi, _ = utf8.DecodeRune(hib[:need])
	if lo == utf8.RuneError || hi == utf8.RuneError {
		// Prefixes such as E0 80 (overlong) or ED A0 (surrogate) decode to
		// nothing; fall back to a full scan that accepts any valid completion.
		return rangeByScan(p, need)
	}
	return lo, hi
}

// rangeByScan finds the lowest and highest valid code point with prefix p by
// trying continuation bytes; only for prefixes near the UTF-8 holes.
func rangeByScan(p []byte, need uint8) (lo, hi rune) {
	lo, hi = -1, -1
	var buf [4]byte
	copy(buf[:], p)
	var walk func(i int)
	walk = func(i int) {
		if i == int(need) {
			r, n := utf8.DecodeRune(buf[:need])
			if r != utf8.RuneError && n == int(need) {
				if lo < 0 || r < lo {
					lo = r
				}
				if r > hi {
					hi = r
				}
			}
			return
		}
		for _, b := range [...]byte{0x80, 0x9F, 0xA0, 0xBF} {
			buf[i] = b
			walk(i + 1)
		}
	}
	walk(len(p))
	return lo, hi
}

// feed advances st by one byte into out (cleared first); false: rejected.
func (g *Grammar) feed(st *state, b byte, out *state, ss *stackSet) (ok bool, err error) {
	*out = state{}
	if st.npend == 0 {
		n := seqLen(b)
		if n == 0 {
			return false, nil
		}
		if n == 1 {
			return g.advanceRune(st.stacks, rune(b), out, ss)
		}
		out.stacks, out.pend[0], out.npend, out.need = st.stacks, b, 1, n
	} else {
		if b < 0x80 || b > 0xBF {
			return false, nil
		}
		*out = *st
		out.pend[out.npend] = b
		out.npend++
		if out.npend == out.need {
			r, size := utf8.DecodeRune(out.pend[:out.need])
			if r == utf8.RuneError || size != int(out.need) {
				return false, nil
			}
			stacks := out.stacks
			*out = state{}
			return g.advanceRune(stacks, r, out, ss)
		}
	}
	lo, hi := prefixRange(out.pend[:out.npend], out.need)
	if lo < 0 || !g.viable(out.stacks, lo, hi) {
		return false, nil
	}
	return true, nil
}

func (g *Grammar) advanceRune(stacks []*node, r rune, out *state, ss *stackSet) (bool, error) {
	ss.s, ss.err = ss.s[:0], nil
	if ss.index != nil {
		clear(ss.index)
		ss.index = nil
	}
	g.step(stacks, r, ss)
	if ss.err != nil {
		return false, ss.err
	}
	if len(ss.s) == 0 {
		return false, nil
	}
	out.stacks = append([]*node(nil), ss.s...)
	return true, nil
}

// Matcher follows one generation through a Grammar, byte by byte. It is not
// safe for concurrent use; Clone gives an independent copy cheaply (stacks
// are immutable and shared).
type Matcher struct {
	g   *Grammar
	st  state
	err error
	ss  stackSet
	dfa *dfa // Allowed's cache of states and transitions
}

// NewMatcher starts at the beginning of root.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{g: g}
	var ss stackSet
	start := g.rules[g.root]
	for _, a := range start {
		g.expand(push(a, nil), &ss)
	}
	m.st.stacks = ss.s
	m.err = ss.err
	return m
}

// Clone returns an independent matcher in the same state.
func (m *Matcher) Clone() *Matcher {
	return &Matcher{g: m.g, st: m.st, err: m.err}
}

// Accept feeds bytes, which may end (or start) inside a UTF-8 sequence.
// It returns false, leaving m unchanged, if some byte cannot continue any
// sentence of the grammar, is not valid UTF-8, or would need more than
// MaxStacks stacks (then Err returns ErrTooManyStacks).
func (m *Matcher) Accept(b []byte) bool {
	cur := m.st
	var next state
	for _, c := range b {
		ok, err := m.g.feed(&cur, c, &next, &m.ss)
		if !ok {
			m.err = err
			return false
		}
		cur = next
	}
	m.st = cur
	m.err = nil
	return true
}

// Err explains the last refusal of Accept when it was not the grammar's
// answer but its bound: ErrTooManyStacks. It is nil otherwise.
func (m *Matcher) Err() error { return m.err }

// CanEnd reports whether the input so far is a whole sentence of the grammar.
func (m *Matcher) CanEnd() bool {
	if m.st.npend != 0 {
		return false
	}
	for _, n := range m.st.stacks {
		if n == nil {
			return true
		}
	}
	return false
}

// Dead reports that nothing more can be accepted and the input cannot end:
// no stack is empty and none has a class with a character on top (a
// grammar such as [^\x00-\U0010FFFF] is dead from the start). It never
// follows a true Accept in a grammar whose classes are not empty.
func (m *Matcher) Dead() bool {
	for _, n := range m.st.stacks {
		if n == nil || m.g.classes[m.g.elems[n.pos].arg].live() {
			return false
		}
	}
	return true
}

package grammar

import "unicode/utf8"

// runeKey names a code point completed from the stacks of state base (a
// state with nothing pending): step depends on the code point only through
// which of base's stacks hold it in their top class (bit i for stack i),
// so code points with the same bits lead to the same state. Inside a JSON
// string that is almost every non-ASCII code point, and a table row per
// half-read UTF-8 sequence no longer costs a step of every stack per
// continuation byte.
type runeKey struct {
	base int32
	in   uint64
}

// completes returns the key of the code point that byte c finishes from the
// pending state p; false when c does not finish a valid one, or p's base is
// not known, or base has more stacks than the bits of in.
func (d *dfa) completes(p int32, c byte) (runeKey, bool) {
	st := &d.states[p]
	b := d.base[p]
	if st.npend == 0 || st.npend+1 != st.need || b < 0 {
		return runeKey{}, false
	}
	stacks := d.states[b].stacks
	if len(stacks) > 64 {
		return runeKey{}, false
	}
	seq := st.pend
	seq[st.npend] = c
	r, size := utf8.DecodeRune(seq[:st.need])
	if r == utf8.RuneError || size != int(st.need) {
		return runeKey{}, false // feed refuses it: no shortcut needed
	}
	k := runeKey{base: b}
	for i, n := range stacks {
		if n != nil && d.g.classes[d.g.elems[n.pos].arg].has(r) {
			k.in |= 1 << i
		}
	}
	return k, true
}

// setBase records for a new pending state q, reached from p on a byte,
// the state with q's stacks and nothing pending.
func (d *dfa) setBase(p, q int32) {
	if d.states[q].npend == 0 || d.base[q] >= 0 {
		return
	}
	if d.states[p].npend == 0 {
		d.base[q] = p
	} else {
		d.base[q] = d.base[p]
	}
}

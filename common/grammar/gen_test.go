package grammar

import (
	"math/rand/v2"
	"unicode/utf8"
)

// sentenceGen produces random sentences of a compiled grammar by a random
// walk: below the depth bound each alternative is equally likely, past it
// the walk takes an alternative of least height so it always terminates.
type sentenceGen struct {
	g      *Grammar
	rng    *rand.Rand
	height []int // rule -> least derivation height (huge: none finite)
	bound  int
}

const noHeight = 1 << 30

func newSentenceGen(g *Grammar, rng *rand.Rand, bound int) *sentenceGen {
	sg := &sentenceGen{g: g, rng: rng, bound: bound, height: make([]int, len(g.rules))}
	for i := range sg.height {
		sg.height[i] = noHeight
	}
	for changed := true; changed; {
		changed = false
		for id := range g.rules {
			for _, a := range g.rules[id] {
				if h := sg.altHeight(a); h < sg.height[id] {
					sg.height[id] = h
					changed = true
				}
			}
		}
	}
	return sg
}

func (sg *sentenceGen) altHeight(start int32) int {
	h := 1
	for pos := start; sg.g.elems[pos].kind != elemEnd; pos++ {
		if e := sg.g.elems[pos]; e.kind == elemRef {
			if sg.height[e.arg] >= noHeight {
				return noHeight
			}
			h = max(h, sg.height[e.arg]+1)
		}
	}
	return h
}

// sentence is one random sentence of root.
func (sg *sentenceGen) sentence() []byte {
	var out []byte
	sg.rule(sg.g.root, 0, &out)
	return out
}

func (sg *sentenceGen) rule(id int32, depth int, out *[]byte) {
	alts := sg.g.rules[id]
	var a int32
	if depth < sg.bound {
		a = alts[sg.rng.IntN(len(alts))]
		if sg.altHeight(a) >= noHeight {
			a = sg.lowest(alts)
		}
	} else {
		a = sg.lowest(alts)
	}
	for pos := a; sg.g.elems[pos].kind != elemEnd; pos++ {
		e := sg.g.elems[pos]
		if e.kind == elemRef {
			sg.rule(e.arg, depth+1, out)
			continue
		}
		*out = utf8.AppendRune(*out, sg.char(sg.g.classes[e.arg]))
	}
}

func (sg *sentenceGen) lowest(alts []int32) int32 {
	best, bh := alts[0], noHeight+1
	var ties []int32
	for _, a := range alts {
		h := sg.altHeight(a)
		if h < bh {
			best, bh, ties = a, h, ties[:0]
		}
		if h == bh {
			ties = append(ties, a)
		}
	}
	if len(ties) > 0 {
		return ties[sg.rng.IntN(len(ties))]
	}
	return best
}

// char picks a code point of the class, mostly near the bottom of a range
// (so ASCII and short sequences dominate) and never a surrogate.
func (sg *sentenceGen) char(c *class) rune {
	for {
		i := sg.rng.IntN(len(c.ranges) / 2)
		lo, hi := c.ranges[2*i], c.ranges[2*i+1]
		span := int(hi - lo + 1)
		var r rune
		if span > 128 && sg.rng.IntN(4) != 0 {
			r = lo + rune(sg.rng.IntN(128))
		} else {
			r = lo + rune(sg.rng.IntN(span))
		}
		if utf8.ValidRune(r) {
			return r
		}
	}
}

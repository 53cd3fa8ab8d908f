package grammartest

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// ErrNoEnd is Walk's error when the sentence passed its limit without
// ending: a grammar that allows long sentences may simply not have
// reached an end, which is not a fault of the grammar.
var ErrNoEnd = errors.New("grammartest: the walk passed its limit without an end")

// Matcher is what Walk needs of a grammar matcher; *grammar.Matcher is
// one. Walk is generic over it because grammar's own tests import this
// package, which therefore cannot import grammar.
type Matcher[M any] interface {
	Accept(b []byte) bool
	CanEnd() bool
	Clone() M
}

// walkBytes are the byte strings Walk tries to feed: printable ASCII and a
// few whitespace and multi-byte characters.
var walkBytes = func() [][]byte {
	var out [][]byte
	for b := byte(0x20); b < 0x7F; b++ {
		out = append(out, []byte{b})
	}
	for _, s := range []string{"\n", "\t", "é", "中", "😀"} {
		out = append(out, []byte(s))
	}
	return out
}()

// Walk generates one random sentence of m's grammar, feeding m as it
// goes: at each step a byte string m takes, uniform over those it takes,
// and once the sentence is target bytes long, the first of closers m
// takes (the characters that end strings and brackets), so that the walk
// heads for an end. It stops at a random point where m can end, once past
// target, and fails when m is stuck (takes nothing and cannot end), or
// with ErrNoEnd when the sentence passes limit bytes.
func Walk[M Matcher[M]](m M, rng *rand.Rand, closers [][]byte, target, limit int) ([]byte, error) {
	var doc []byte
	order := make([]int, len(walkBytes))
	for i := range order {
		order[i] = i
	}
	for len(doc) < limit {
		if m.CanEnd() && (len(doc) >= target || rng.IntN(20) == 0) {
			return doc, nil
		}
		var next []byte
		if len(doc) >= target {
			for _, c := range closers {
				if m.Clone().Accept(c) {
					next = c
					break
				}
			}
		}
		if next == nil {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, i := range order {
				if m.Clone().Accept(walkBytes[i]) {
					next = walkBytes[i]
					break
				}
			}
		}
		if next == nil {
			if m.CanEnd() {
				return doc, nil
			}
			return nil, fmt.Errorf("the matcher is stuck after %q", doc)
		}
		if !m.Accept(next) {
			return nil, fmt.Errorf("Accept(%q) refused after a clone accepted it, after %q", next, doc)
		}
		doc = append(doc, next...)
	}
	return nil, fmt.Errorf("%w: %d bytes, %q", ErrNoEnd, len(doc), doc)
}

// Package grammartest holds what tests and benchmarks of structured output
// share: a synthetic vocabulary shaped like a real one.
package grammartest

import "math/rand/v2"

// ByteLevelVocab synthesizes a vocabulary shaped like a byte-level BPE one:
// all 256 single bytes, then pieces of 2 to 16 bytes (mostly 3 to 7), a
// fifth starting with a space, mostly ASCII letters with some punctuation,
// digits and multi-byte UTF-8 (which may be cut at the end).
// The same n and seed give the same pieces: benchmarks in several
// packages measure over one vocabulary.
func ByteLevelVocab(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	pieces := make([][]byte, 0, n)
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	letters := "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ"
	punct := `{}[]":,.-_0123456789\/'()`
	for len(pieces) < n {
		l := 2 + int(rng.ExpFloat64()*3)
		if l > 16 {
			l = 16
		}
		p := make([]byte, 0, l+3)
		if rng.IntN(5) == 0 {
			p = append(p, ' ')
		}
		for len(p) < l {
			switch k := rng.IntN(20); {
			case k < 15:
				p = append(p, letters[rng.IntN(len(letters))])
			case k < 19:
				p = append(p, punct[rng.IntN(len(punct))])
			default:
				p = append(p, string(rune(0xA0+rng.IntN(0x3000)))...)
			}
		}
		if len(p) > l {
			p = p[:l]
		}
		pieces = append(pieces, p)
	}
	return pieces
}

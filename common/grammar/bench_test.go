package grammar

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// byteLevelVocab synthesizes a vocabulary shaped like a byte-level BPE one:
// all 256 single bytes, then pieces of 2 to 16 bytes (mostly 3 to 7), a
// fifth starting with a space, mostly ASCII letters with some punctuation,
// digits and multi-byte UTF-8 (which may be cut at the end).
func byteLevelVocab(n int, seed uint64) [][]byte {
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

// BenchmarkAllowed measures one mask over a large vocabulary with the JSON
// grammar at the start, inside a string (almost every token allowed) and
// inside a number (almost none), the work a sampler adds to a decode step:
// cold (a matcher whose caches are empty) and warm (the caches left by a
// call from the same state, as in consecutive steps inside a string: the
// whole mask is kept, so warm is a copy of it).
func BenchmarkAllowed(b *testing.B) {
	src, err := os.ReadFile("testdata/json.gbnf")
	if err != nil {
		b.Fatal(err)
	}
	g, err := Parse(string(src))
	if err != nil {
		b.Fatal(err)
	}
	states := []struct{ name, prefix string }{
		{"start", ``},
		{"string", `{"key": "some te`},
		{"number", `{"key": [12`},
	}
	for _, n := range []int{128256, 262144} {
		v := NewVocab(byteLevelVocab(n, uint64(n)))
		for _, st := range states {
			m := g.NewMatcher()
			if !m.Accept([]byte(st.prefix)) {
				b.Fatalf("prefix %q refused", st.prefix)
			}
			for _, warm := range []bool{false, true} {
				name := fmt.Sprintf("vocab=%d/%s/cold", n, st.name)
				if warm {
					name = fmt.Sprintf("vocab=%d/%s/warm", n, st.name)
				}
				b.Run(name, func(b *testing.B) {
					dst := make([]uint64, (n+63)/64)
					warmed := m.Clone()
					warmed.Allowed(v, dst)
					b.ReportAllocs()
					for b.Loop() {
						if warm {
							dst = warmed.Allowed(v, dst) // the cache of the call before
						} else {
							dst = m.Clone().Allowed(v, dst) // a clone starts with no cache
						}
					}
					allowed := 0
					for _, w := range dst {
						for ; w != 0; w &= w - 1 {
							allowed++
						}
					}
					b.ReportMetric(float64(allowed), "allowed")
				})
			}
		}
	}
}

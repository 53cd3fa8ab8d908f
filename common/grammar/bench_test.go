package grammar

import (
	"fmt"
	"os"
	"testing"

	"kvlab/common/grammar/grammartest"
)

// BenchmarkAllowed measures one mask over a large vocabulary with the JSON
// grammar at the start, inside a string (almost every token allowed) and
// inside a number (almost none), the work a sampler adds to a decode step:
// first (a grammar just parsed: its position masks are made by the call),
// cold (a matcher whose own caches are empty, of a grammar whose position
// masks were made before, as for every request after the first with a
// grammar) and warm (the caches left by a call from the same state, as in
// consecutive steps inside a string: the whole mask is kept, so warm is a
// copy of it).
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
		v := NewVocab(grammartest.ByteLevelVocab(n, uint64(n)))
		for _, st := range states {
			m := g.NewMatcher()
			if !m.Accept([]byte(st.prefix)) {
				b.Fatalf("prefix %q refused", st.prefix)
			}
			for _, kind := range []string{"first", "cold", "warm"} {
				b.Run(fmt.Sprintf("vocab=%d/%s/%s", n, st.name, kind), func(b *testing.B) {
					dst := make([]uint64, (n+63)/64)
					warmed := m.Clone()
					warmed.Allowed(v, dst)
					b.ReportAllocs()
					for b.Loop() {
						switch kind {
						case "first":
							b.StopTimer()
							fresh, err := parse(string(src)) // not Parse: no grammar kept
							if err != nil {
								b.Fatal(err)
							}
							fm := fresh.NewMatcher()
							fm.Accept([]byte(st.prefix))
							b.StartTimer()
							dst = fm.Allowed(v, dst)
						case "cold":
							dst = m.Clone().Allowed(v, dst) // a clone starts with no cache
						default:
							dst = warmed.Allowed(v, dst) // the cache of the call before
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

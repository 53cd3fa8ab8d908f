package grammar

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestMaskCacheAgreesWithPlain random walks through random grammars (and
// the JSON one), token by token, each token drawn from the mask itself,
// and holds every cached Allowed to allowedPlain: with the default bound,
// with a cache of two masks (so entries are evicted and reused all the
// time) and with none. The walk alternates between two vocabularies on one
// matcher, so a mask must be looked up by vocabulary as well as state, and
// it scribbles over dst between calls, so a cached mask must be a copy.
func TestMaskCacheAgreesWithPlain(t *testing.T) {
	defer func(n int) { maxMasks = n }(maxMasks)
	var alphabet []byte
	for _, r := range regRunes {
		alphabet = append(alphabet, string(r)...)
	}
	alphabet = append(alphabet, []byte(`{}[],:"\0123456789 truefalsn`)...)
	json := mustParseFile(t, "testdata/json.gbnf")
	for _, bound := range []int{32, 2, 0} {
		maxMasks = bound
		rng := rand.New(rand.NewPCG(21, uint64(bound)))
		hits, steps := 0, 0
		for gi := range 60 {
			g := json
			if gi%3 != 0 {
				rg := &regGen{rng: rng}
				body, _, _ := rg.expr(4)
				var err error
				if g, err = Parse(strings.Join(append([]string{"root ::= " + body}, rg.rules...), "\n")); err != nil {
					t.Fatal(err)
				}
			}
			vs := []*Vocab{
				NewVocab(randomVocab(rng, 300+rng.IntN(500), alphabet)),
				NewVocab(randomVocab(rng, 300+rng.IntN(500), alphabet)),
			}
			m := g.NewMatcher()
			var dst []uint64
			for step := range 60 {
				v := vs[rng.IntN(2)]
				for i := range dst {
					dst[i] = rng.Uint64() // Allowed must clear it
				}
				dst = m.Allowed(v, dst)
				want := m.allowedPlain(v, nil)
				if !slices.Equal(dst, want) {
					t.Fatalf("bound %d, grammar %d, step %d: cached mask differs from plain", bound, gi, step)
				}
				steps++
				id, ok := pickAllowed(rng, v, want)
				if !ok {
					break
				}
				// Short tokens mostly, so the walk stays inside loops
				// and comes back to states it has seen.
				if p := v.pieces[id]; len(p) > 2 && rng.IntN(2) == 0 {
					continue
				}
				if !m.Accept(v.pieces[id]) {
					t.Fatalf("grammar %d: token %q was allowed and refused", gi, v.pieces[id])
				}
			}
			if m.dfa != nil {
				hits += m.dfa.masks.hits
				if len(m.dfa.masks.entries) > max(bound, 0) {
					t.Fatalf("bound %d: %d masks kept", bound, len(m.dfa.masks.entries))
				}
			}
		}
		t.Logf("bound %d: %d of %d masks from the cache", bound, hits, steps)
		if bound > 0 && hits < steps/4 {
			t.Fatalf("bound %d: only %d of %d masks came from the cache: the test is too weak", bound, hits, steps)
		}
		if bound == 0 && hits != 0 {
			t.Fatalf("a cache of no masks served %d", hits)
		}
	}
}

// TestMaskCacheJSONString: inside a JSON string the state repeats, so
// after the first mask the rest come from the cache, and stay exact.
func TestMaskCacheJSONString(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := mustParseFile(t, "testdata/json.gbnf")
	v := NewVocab(randomVocab(rng, 2000, []byte(`abcdef {}[],:"0123456789`)))
	m := g.NewMatcher()
	if !m.Accept([]byte(`{"key": "x`)) {
		t.Fatal("prefix refused")
	}
	for i, chunk := range []string{"ab", "c", "de f", "a"} {
		if got, want := m.Allowed(v, nil), m.allowedPlain(v, nil); !slices.Equal(got, want) {
			t.Fatalf("step %d: masks differ", i)
		}
		if !m.Accept([]byte(chunk)) {
			t.Fatalf("%q refused", chunk)
		}
	}
	if h := m.dfa.masks.hits; h != 3 {
		t.Fatalf("%d masks from the cache inside a string, want 3", h)
	}
}

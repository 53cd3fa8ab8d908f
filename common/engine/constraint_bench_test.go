package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"kvlab/common/grammar"
	"kvlab/common/grammar/grammartest"
)

// benchGrammar is a grammar.Matcher as a Constraint, the adapter of
// common/grammar/tokens rebuilt here (that package imports this one).
type benchGrammar struct {
	m      *grammar.Matcher
	v      *grammar.Vocab
	pieces [][]byte
	spent  *time.Duration // time inside Allowed, when set
}

func (c *benchGrammar) Allowed(dst []uint64) []uint64 {
	if c.spent == nil {
		return c.m.Allowed(c.v, dst)
	}
	t0 := time.Now()
	dst = c.m.Allowed(c.v, dst)
	*c.spent += time.Since(t0)
	return dst
}
func (c *benchGrammar) Accept(tok int32) bool { return c.m.Accept(c.pieces[tok]) }
func (c *benchGrammar) CanEnd() bool          { return c.m.CanEnd() }
func (c *benchGrammar) Clone() Constraint {
	return &benchGrammar{m: c.m.Clone(), v: c.v, pieces: c.pieces}
}

// benchVocab is grammar's benchmark vocabulary (grammartest.ByteLevelVocab)
// of n-1 pieces, then end-of-sequence, with no bytes, as the last id.
func benchVocab(n int, seed uint64) [][]byte {
	return append(grammartest.ByteLevelVocab(n-1, seed), nil)
}

// tokenize splits s greedily into the longest pieces of the vocabulary
// (every single byte is one, so it always succeeds): the replayed output.
func tokenize(index map[string]int32, s string) []int32 {
	var out []int32
	for len(s) > 0 {
		for l := min(len(s), 16); l > 0; l-- {
			if id, ok := index[s[:l]]; ok {
				out = append(out, id)
				s = s[l:]
				break
			}
		}
	}
	return out
}

// benchRecord is one JSON object of a structured answer; the three differ
// in their values, not their keys.
func benchRecord(i int) string {
	names := []string{"Ada Lovelace", "Grace Hopper", "Alan Turing"}
	bios := []string{
		"Wrote the first program for the Analytical Engine, a machine that was never built in her lifetime.",
		"Built the first compiler and made the case for programming languages that read like English.",
		"Asked what it means for a machine to compute, and answered with a tape, a head and a table.",
	}
	return fmt.Sprintf(`{"id": %d, "name": %q, "email": "user%d@example.com", "tags": ["math", "computing", "history"], "active": true, "score": %d.5, "bio": %q}`,
		1815+i*91, names[i], i, 97-i*3, bios[i])
}

// BenchmarkConstrainedStep is the whole cost a grammar adds to one
// constrained token, at the vocabulary sizes of Llama-3.2-1B, Qwen3-0.6B
// and Gemma-3-1B: Allowed (through the Constraint), the engine's masking
// of one row of logits (Engine.constrained: copy, bias, -Inf, EOS) and
// Accept, replaying a JSON answer `[A, B, C]` (three records of one
// shape) token by token with the JSON grammar. first: a grammar no
// request has used yet and a fresh matcher per document, as the first
// request with a new grammar starts (the grammar's position masks are
// made on the way), every token timed; cold: a fresh matcher of one
// grammar per document, as every later request with that grammar starts
// (the position masks are there, the matcher's own caches empty), every
// token timed; warm: only the tokens of C and the closing bracket, after
// B filled the matcher's caches (the steady state of a long array: B's
// parse stacks are C's, while A's differ, being the array's first
// element). Reported as ns/token, with allowed-ns/token the part of it
// spent in Allowed, worst-ns/token the slowest single token (one from
// a state no cache has seen yet) and docworst-ns/token the slowest token
// of each document, the least of them over the documents: every document
// does the same work, and a pause of a shared machine lands in one
// document's tokens, not in all of them.
func BenchmarkConstrainedStep(b *testing.B) {
	src, err := os.ReadFile("../grammar/testdata/json.gbnf")
	if err != nil {
		b.Fatal(err)
	}
	// Parse keeps recent grammars by their text: a comment no other
	// document had makes a grammar no request has used.
	fresh := 0
	parse := func() *grammar.Grammar {
		fresh++
		g, err := grammar.Parse(fmt.Sprintf("%s\n# bench %d %d\n", src, fresh, time.Now().UnixNano()))
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	g := parse()
	for _, n := range []int{128256, 151936, 262144} {
		pieces := benchVocab(n, uint64(n))
		v := grammar.NewVocab(pieces)
		index := make(map[string]int32, n)
		for id := len(pieces) - 1; id >= 0; id-- {
			if len(pieces[id]) > 0 {
				index[string(pieces[id])] = int32(id)
			}
		}
		head := tokenize(index, "["+benchRecord(0)+", "+benchRecord(1)+", ")
		tail := tokenize(index, benchRecord(2)+"]")
		doc := append(append([]int32(nil), head...), tail...)
		rng := rand.New(rand.NewPCG(1, 2))
		row := make([]float32, n)
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		eos := int32(n - 1)
		// One document with g first, so cold finds its position masks
		// at every size, as a second request would.
		for m, i := g.NewMatcher(), 0; i < len(doc); i++ {
			m.Allowed(v, nil)
			m.Accept(pieces[doc[i]])
		}
		for _, kind := range []string{"first", "cold", "warm"} {
			warm := kind == "warm"
			b.Run(fmt.Sprintf("vocab=%d/%s", n, kind), func(b *testing.B) {
				e := &Engine{eos: map[int32]bool{eos: true}}
				var spent, inAllowed, worst time.Duration
				least := time.Duration(math.MaxInt64) // the least of the documents' slowest
				tokens := 0
				for b.Loop() {
					gr := g
					if kind == "first" {
						gr = parse()
					}
					con := &benchGrammar{m: gr.NewMatcher(), v: v, pieces: pieces}
					s := &sequence{con: con}
					step := func(tok int32) {
						if _, err := e.constrained(s, row); err != nil {
							b.Fatal(err)
						}
						if !s.con.Accept(tok) {
							b.Fatalf("token %d (%q) refused", tok, pieces[tok])
						}
					}
					timed := doc
					if warm {
						for _, tok := range head {
							step(tok)
						}
						timed = tail
					}
					con.spent = &inAllowed
					t0 := time.Now()
					var slowest time.Duration
					for _, tok := range timed {
						t1 := time.Now()
						step(tok)
						slowest = max(slowest, time.Since(t1))
					}
					worst = max(worst, slowest)
					least = min(least, slowest)
					spent += time.Since(t0)
					con.spent = nil
					tokens += len(timed)
					if !s.con.CanEnd() {
						b.Fatal("the document did not end the grammar")
					}
				}
				b.ReportMetric(float64(spent.Nanoseconds())/float64(tokens), "ns/token")
				b.ReportMetric(float64(inAllowed.Nanoseconds())/float64(tokens), "allowed-ns/token")
				b.ReportMetric(float64(worst.Nanoseconds()), "worst-ns/token")
				b.ReportMetric(float64(least.Nanoseconds()), "docworst-ns/token")
				b.ReportMetric(float64(tokens)/float64(b.N), "tokens/doc")
			})
		}
	}
}

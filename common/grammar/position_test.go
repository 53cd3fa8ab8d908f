package grammar

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// positionWalk random walks m token by token (each token drawn from the
// plain mask) and holds every Allowed to allowedPlain. The whole-mask
// cache is off, so every mask is put together again (or walked). It
// returns how many masks came from position masks and how many steps.
func positionWalk(t *testing.T, rng *rand.Rand, m *Matcher, v *Vocab, steps int, what string) (positioned, done int) {
	t.Helper()
	var dst []uint64
	for step := range steps {
		before := 0
		if m.dfa != nil {
			before = m.dfa.positioned
		}
		dst = m.Allowed(v, dst)
		if m.dfa.positioned > before {
			positioned++
		}
		want := m.allowedPlain(v, nil)
		if !slices.Equal(dst, want) {
			for id := range v.Len() {
				if g, w := dst[id>>6]>>(id&63)&1, want[id>>6]>>(id&63)&1; g != w {
					t.Fatalf("%s, step %d: token %d %q: Allowed %d, plain %d", what, step, id, v.pieces[id], g, w)
				}
			}
		}
		done++
		id, ok := pickAllowed(rng, v, want)
		if !ok {
			break
		}
		if !m.Accept(v.pieces[id]) {
			t.Fatalf("%s: token %q allowed and refused", what, v.pieces[id])
		}
	}
	return positioned, done
}

// TestPositionMasksAgreeWithPlain: masks put together from position masks
// are the plain ones, token by token along random walks, on grammars
// chosen to pop out of a key in every way: nested rules whose tokens pop
// several frames at once, the same string rule under different callers,
// tokens that end exactly where a frame pops, multi-byte characters cut
// at a token's end, alternatives that end at once or go on; then random
// regular grammars and the JSON grammar. Two thirds of the masks must
// come from position masks (most others are states inside a UTF-8
// sequence), or the test would only test the old walk.
func TestPositionMasksAgreeWithPlain(t *testing.T) {
	defer func(n int) { maxMasks = n }(maxMasks)
	maxMasks = 0
	grammars := []string{
		// One string rule, three callers, each with its own rest.
		`root ::= "{" str ":" str ("," str ":" (str | num))* "}"
str ::= "\"" [a-zé☃]* "\""
num ::= [0-9]+`,
		// Deep nesting: a token "ab)))" pops many frames.
		`root ::= e
e ::= "(" e ")" | "a" "b"? | "[" e? "]"`,
		// Alternatives that end at once or go on, under a caller that
		// decides what may follow.
		`root ::= (x "!" | x "?" y)+
x ::= "a" | "ab" | "abc" "d"*
y ::= "é" x | "😀"`,
		// A frame that ends inside a multi-byte character's neighbours.
		`root ::= ("é"+ "☃" | "😀" [a-c]*)* "."`,
	}
	var alphabet []byte
	for _, r := range regRunes {
		alphabet = append(alphabet, string(r)...)
	}
	alphabet = append(alphabet, []byte(`{}[](),:!?."0123456789 abcd`)...)
	rng := rand.New(rand.NewPCG(31, 32))
	positioned, steps := 0, 0
	check := func(g *Grammar, what string) {
		v := NewVocab(randomVocab(rng, 400+rng.IntN(600), alphabet))
		for walk := range 4 {
			p, n := positionWalk(t, rng, g.NewMatcher(), v, 40, fmt.Sprintf("%s, walk %d", what, walk))
			positioned += p
			steps += n
		}
	}
	for i, src := range grammars {
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		check(g, fmt.Sprintf("grammar %d", i))
	}
	check(mustParseFile(t, "testdata/json.gbnf"), "json")
	for gi := range 40 {
		rg := &regGen{rng: rng}
		body, _, _ := rg.expr(4)
		g, err := Parse(strings.Join(append([]string{"root ::= " + body}, rg.rules...), "\n"))
		if err != nil {
			t.Fatal(err)
		}
		check(g, fmt.Sprintf("random grammar %d", gi))
	}
	t.Logf("%d of %d masks from position masks", positioned, steps)
	if positioned < steps*2/3 {
		t.Fatalf("only %d of %d masks came from position masks: the test is too weak", positioned, steps)
	}
}

// TestPositionMasksMaxStacks: where a token's bytes need more than
// MaxStacks stacks, Accept refuses it whichever stack would take it, and
// so must Allowed. Three grammars: one whose stacks double with every "a"
// (2^12 > MaxStacks); one where each of two stacks alone stays under the
// bound when its key pops but together they pass it, so only the sum over
// the state's stacks can tell; and one where a single byte takes one
// stack past the bound while another stack would accept the token.
func TestPositionMasksMaxStacks(t *testing.T) {
	defer func(n int) { maxMasks = n }(maxMasks)
	maxMasks = 0
	var alts []string
	for i := range 2100 {
		alts = append(alts, fmt.Sprintf(`"\u%04x"`, 0x100+i))
	}
	wide := strings.Join(alts, " | ")
	halves := "a ::= b \"x\"?\nb ::= c \"x\"?\nc ::= \"p\" \"x\"?\ny1 ::= " + wide + "\n"
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf(`"\u%04x"`, 0x100+i))
	}
	cases := []struct{ name, src, extra string }{
		{"doubling", `root ::= x
x ::= "a" x "c" | "a" x "c" "c" | "b"`, ""},
		// Four frames deep, so the key is not the whole stack and what
		// pops out of it is the expansion of y1 or y2 below.
		{"two halves", halves + "root ::= a y1 | a y2\ny2 ::= " + wide, ""},
		// One byte after the first stack's key ("q") takes it past
		// MaxStacks at once, while "pq" never leaves the second stack's
		// key: only the walk's refusal for the bound tells that "pq" is
		// refused, though the second stack alone would take it.
		{"one step past", halves + "root ::= a \"q\" many | \"p\" \"q\" \"z\"?\nmany ::= " + strings.Join(many, " | "), "pq"},
	}
	for _, c := range cases {
		g, err := Parse(c.src)
		if err != nil {
			t.Fatal(err)
		}
		// No token starts with "p" and goes on (but extra), so no walk
		// of U meets the wide state after "p": only the bound on what
		// popping expands can tell.
		pieces := [][]byte{[]byte("p"), []byte(c.extra), []byte("x"), []byte("b"), []byte("c"), []byte("\u0100"), []byte("x\u0101"), []byte("qz")}
		for n := 1; n <= 14; n++ {
			pieces = append(pieces, []byte(strings.Repeat("a", n)), []byte(strings.Repeat("a", n)+"b"))
		}
		v := NewVocab(pieces)
		m := g.NewMatcher()
		for _, prefix := range []string{"", "a", "aaaa", "aaaaaaa"} {
			m := m.Clone()
			if !m.Accept([]byte(prefix)) {
				continue // the other grammar
			}
			got, want := m.Allowed(v, nil), m.allowedPlain(v, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("%s after %q: Allowed %b, plain %b", c.name, prefix, got, want)
			}
		}
		if c.name == "two halves" {
			// "p" alone pops a with 2100 stacks from each side: past
			// the bound together.
			if got := m.allowedPlain(v, nil); got[0]&1 != 0 {
				t.Fatal(`plain allows "p": the case does not reach MaxStacks`)
			}
			if one, _ := Parse(halves + "root ::= a y1"); !one.NewMatcher().Accept([]byte("p")) {
				t.Fatal(`one half alone refuses "p": the case is not what it says`)
			}
		}
		if c.name == "one step past" {
			if got := m.allowedPlain(v, nil); got[0]&3 != 1 {
				t.Fatalf(`plain mask %b: want "p" allowed and "pq" refused for MaxStacks`, got[0])
			}
		}
	}
}

// TestPositionMasksShared: the position masks live on the Grammar: a
// second matcher (a second request, parsing the same text) computes none,
// its masks are still exact, and matchers on many goroutines at once
// (run with -race) share them.
func TestPositionMasksShared(t *testing.T) {
	defer func(n int) { maxMasks = n }(maxMasks)
	maxMasks = 0
	src := "root ::= \"[\" obj (\", \" obj)* \"]\"\nobj ::= \"{\\\"k\\\": \" s \", \\\"v\\\": \" s \"}\"\ns ::= \"\\\"\" [a-z ]* \"\\\"\"\n# shared " + t.Name()
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if g2, _ := Parse(src); g2 != g {
		t.Fatal("the same text parsed twice gave two grammars")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	v := NewVocab(randomVocab(rng, 1500, []byte(`[]{}", :kvabcdefgh `)))
	doc := `[{"k": "ab cd", "v": "efg"}, {"k": "h", "v": ""}]`
	follow := func(m *Matcher) {
		rng := rand.New(rand.NewPCG(43, 44)) // the same chunks each time
		for i := 0; i < len(doc); {
			k := 1 + rng.IntN(min(len(doc)-i, 3))
			got, want := m.Allowed(v, nil), m.allowedPlain(v, nil)
			if !slices.Equal(got, want) {
				t.Errorf("at %q: Allowed differs from plain", doc[:i])
				return
			}
			if !m.Accept([]byte(doc[i : i+k])) {
				t.Errorf("%q refused", doc[i:i+k])
				return
			}
			i += k
		}
	}
	follow(g.NewMatcher())
	walks := g.positions.walks
	if walks == 0 {
		t.Fatal("no position masks were made")
	}
	second := g.NewMatcher()
	follow(second)
	if g.positions.walks != walks {
		t.Fatalf("a second matcher made %d position masks more", g.positions.walks-walks)
	}
	if second.dfa.positioned == 0 {
		t.Fatal("the second matcher used no position masks")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Another text, so a grammar whose cache the goroutines
			// fill together.
			g, err := Parse(src + "\n")
			if err != nil {
				t.Error(err)
				return
			}
			m := g.NewMatcher()
			if !m.Accept([]byte(`[{"k": "a`)) {
				t.Error("prefix refused")
				return
			}
			for range 3 {
				c := m.Clone()
				if got, want := c.Allowed(v, nil), c.allowedPlain(v, nil); !slices.Equal(got, want) {
					t.Error("concurrent Allowed differs from plain")
				}
			}
		}()
	}
	wg.Wait()
}

// TestPositionMasksBoundedMemory: with room for one entry, the rest of
// the states walk the whole trie, and every mask is still exact.
func TestPositionMasksBoundedMemory(t *testing.T) {
	defer func(n, b int) { maxMasks, maxPositionBytes = n, b }(maxMasks, maxPositionBytes)
	maxMasks = 0
	rng := rand.New(rand.NewPCG(51, 52))
	v := NewVocab(randomVocab(rng, 800, []byte(`{}[],:"\0123456789 truefalsné`)))
	maxPositionBytes = v.Len()/8 + 64 // one entry's reservation
	g, err := parse(`root ::= "[" ( s ( "," s )* )? "]"
s ::= "\"" [a-zé]* "\"" | [0-9]+`)
	if err != nil {
		t.Fatal(err)
	}
	for walk := range 6 {
		positionWalk(t, rng, g.NewMatcher(), v, 30, fmt.Sprintf("walk %d", walk))
	}
	if n := len(g.positions.entries); n > 1 {
		t.Fatalf("%d entries kept with room for one", n)
	}
	if g.positions.bytes > maxPositionBytes {
		t.Fatalf("%d bytes kept, bound %d", g.positions.bytes, maxPositionBytes)
	}
}

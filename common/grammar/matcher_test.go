package grammar

import (
	"errors"
	"testing"
)

func mustParse(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStackCap: a grammar whose stacks double with every character (each
// "a" may be closed by "b" or by "c") is refused past MaxStacks with
// ErrTooManyStacks, and the matcher is left usable where it was.
func TestStackCap(t *testing.T) {
	g := mustParse(t, `root ::= "a" root "b" | "a" root "c" | ""`)
	m := g.NewMatcher()
	n := 0
	for m.Accept([]byte("a")) {
		n++
		if k := len(m.st.stacks); k > MaxStacks || n > 16 {
			t.Fatalf("%d stacks after %d characters: the cap did not hold", k, n)
		}
	}
	if !errors.Is(m.Err(), ErrTooManyStacks) {
		t.Fatalf("Err() = %v, want ErrTooManyStacks", m.Err())
	}
	if k := len(m.st.stacks); k > MaxStacks || 2*k+2 < MaxStacks/2 {
		t.Fatalf("refused after %d characters holding %d stacks: not near MaxStacks=%d", n, k, MaxStacks)
	}
	if !m.Accept([]byte("b")) || m.Err() != nil {
		t.Fatal("after the refusal the matcher should go on from where it was")
	}
}

// TestSplitUTF8: a code point may arrive a byte at a time; a prefix no
// class can complete is refused at its first byte, and bad UTF-8
// (overlong, surrogate, stray continuation) is refused.
func TestSplitUTF8(t *testing.T) {
	g := mustParse(t, `root ::= "é" [a-z] "😀"`)
	m := g.NewMatcher()
	for _, b := range []byte("éa😀") {
		if !m.Accept([]byte{b}) {
			t.Fatalf("byte %#x refused", b)
		}
		if m.CanEnd() != (b == 0x80) {
			t.Fatalf("CanEnd after %#x: %v", b, m.CanEnd())
		}
	}
	ascii := mustParse(t, `root ::= [a-z]+ | [\u0100-\u01FF]`)
	for _, bad := range [][]byte{{0xC3}, {0xC0, 0x80}, {0xED, 0xA0, 0x80}, {0x80}, {0xFF}, {'a', 0xC4}} {
		if m := ascii.NewMatcher(); m.Accept(bad) {
			t.Errorf("% x accepted", bad)
		}
	}
	if m := ascii.NewMatcher(); !m.Accept([]byte{0xC4}) || m.CanEnd() || !m.Accept([]byte{0x80}) || !m.CanEnd() {
		t.Error("U+0100 split in two should be accepted")
	}
	any := mustParse(t, `root ::= [^a]`)
	for _, bad := range [][]byte{{0xE0, 0x80}, {0xED, 0xA0}, {0xF4, 0x90}} {
		if m := any.NewMatcher(); m.Accept(bad) {
			t.Errorf("% x (no valid completion) accepted", bad)
		}
	}
}

// TestDead: Dead only when nothing can follow and the input cannot end.
func TestDead(t *testing.T) {
	g := mustParse(t, `root ::= "ab"`)
	m := g.NewMatcher()
	if m.Dead() || !m.Accept([]byte("ab")) || m.Dead() || !m.CanEnd() {
		t.Fatal("a whole sentence is not dead")
	}
	if m.Accept([]byte("c")) || m.Dead() || !m.CanEnd() {
		t.Fatal("a refused byte must leave the matcher unchanged")
	}
	if e := mustParse(t, `root ::= [^\x00-\U0010FFFF]`).NewMatcher(); !e.Dead() {
		t.Fatal("an empty class can take nothing")
	}
}

// TestCloneIndependent: clones go their own way.
func TestCloneIndependent(t *testing.T) {
	g := mustParse(t, `root ::= "a" ("b" | "c")`)
	m := g.NewMatcher()
	m.Accept([]byte("a"))
	c := m.Clone()
	if !m.Accept([]byte("b")) || !c.Accept([]byte("c")) || !m.CanEnd() || !c.CanEnd() {
		t.Fatal("clones interfered")
	}
}

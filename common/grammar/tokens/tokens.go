// Package tokens joins a grammar to the engine: it prepares a tokenizer's
// vocabulary for grammar masks once, and wraps a grammar.Matcher as an
// engine.Constraint, so a grammar written over text restricts the tokens
// a model may sample.
package tokens

import (
	"sync"

	"kvlab/common/engine"
	"kvlab/common/grammar"
)

// Source is where a vocabulary's bytes come from: a *tokenizer.Tokenizer.
type Source interface {
	VocabSize() int
	// Piece is the bytes token id emits.
	Piece(id int32) []byte
	// IsSpecial reports a control token (end of turn, a role marker): it
	// emits no text a grammar could match, so a grammar never allows it.
	IsSpecial(id int32) bool
}

// Vocab is a vocabulary prepared for masks: each token's bytes, and the
// grammar's trie over them. Building it walks every token (128k-262k on
// real models), so a server builds one per tokenizer (Lazy), not one per
// request; it is read-only afterwards and safe to share.
type Vocab struct {
	pieces [][]byte
	g      *grammar.Vocab
}

// NewVocab reads every token of src; special tokens get no bytes.
func NewVocab(src Source) *Vocab {
	pieces := make([][]byte, src.VocabSize())
	for id := range pieces {
		if !src.IsSpecial(int32(id)) {
			pieces[id] = src.Piece(int32(id))
		}
	}
	return &Vocab{pieces: pieces, g: grammar.NewVocab(pieces)}
}

// Lazy builds a Vocab on first use, once, whoever asks first: a server
// that never sees a grammar never pays for it.
type Lazy struct {
	once sync.Once
	src  Source
	v    *Vocab
}

// NewLazy returns a Lazy over src.
func NewLazy(src Source) *Lazy { return &Lazy{src: src} }

// Vocab returns the vocabulary, building it the first time.
func (l *Lazy) Vocab() *Vocab {
	l.once.Do(func() { l.v = NewVocab(l.src) })
	return l.v
}

// Constraint is a grammar.Matcher speaking in tokens: an engine.Constraint
// whose allowed tokens are those whose bytes the grammar accepts next.
type Constraint struct {
	m *grammar.Matcher
	v *Vocab
}

// New returns a Constraint at the start of g's root rule.
func New(g *grammar.Grammar, v *Vocab) *Constraint {
	return &Constraint{m: g.NewMatcher(), v: v}
}

// Allowed sets the bit of every token whose bytes the matcher accepts
// from its state. dst keeps its length (the engine's vocabulary may have
// more rows than the tokenizer has tokens: those stay clear).
func (c *Constraint) Allowed(dst []uint64) []uint64 {
	got := c.m.Allowed(c.v.g, dst)
	if len(got) > 0 && len(dst) > 0 && &got[0] != &dst[0] {
		copy(dst, got) // the grammar's bitset was longer than dst
	}
	return dst
}

// Accept feeds token tok's bytes to the matcher.
func (c *Constraint) Accept(tok int32) bool {
	if tok < 0 || int(tok) >= len(c.v.pieces) || len(c.v.pieces[tok]) == 0 {
		return false
	}
	return c.m.Accept(c.v.pieces[tok])
}

// CanEnd reports whether the text so far is a whole sentence.
func (c *Constraint) CanEnd() bool { return c.m.CanEnd() }

// Clone returns an independent copy at the same place in the grammar.
func (c *Constraint) Clone() engine.Constraint { return &Constraint{m: c.m.Clone(), v: c.v} }

// Err is the matcher's explanation of its last refusal when that was its
// bound, not the grammar (grammar.Matcher.Err).
func (c *Constraint) Err() error { return c.m.Err() }

var _ engine.Constraint = (*Constraint)(nil)

package server

import (
	"errors"
	"sync"

	"kvlab/common/engine"
	"kvlab/common/grammar"
	"kvlab/common/grammar/tokens"
)

// structuredFields are the request fields that constrain a generation's
// text to a language (structured output), on every generation endpoint as
// on llama-server: grammar is llama.cpp's GBNF.
type structuredFields struct {
	Grammar string `json:"grammar"`
}

// grammarVocab is the tokenizer's vocabulary prepared for grammar masks,
// built by the first request with a grammar (a walk over every token) and
// shared by all after it.
type grammarVocab struct {
	once sync.Once
	v    *tokens.Vocab
}

// structured reads q's structured-output fields into g: the grammar is
// parsed here, once per request, and each sample gets its own matcher at
// Submit (constraint). A grammar that does not parse is a 400 naming the
// field and the line and column.
func (h *Handler) structured(q *structuredFields, g *genRequest) *apiError {
	if q.Grammar == "" {
		return nil
	}
	if h.opts.Tokenizer == nil {
		return errBadRequest("grammar", "grammar needs the model's tokenizer, and this server has none")
	}
	gr, err := grammar.Parse(q.Grammar)
	if err != nil {
		var se *grammar.SyntaxError
		if errors.As(err, &se) {
			return errBadRequest("grammar", "grammar: %v", se)
		}
		return errBadRequest("grammar", "grammar: %v", err)
	}
	g.grammar = gr
	return nil
}

// constraint is a fresh engine constraint for g's grammar, nil (the
// interface's nil, not a typed one) for an unconstrained request.
func (h *Handler) constraint(g *genRequest) engine.Constraint {
	if g.grammar == nil {
		return nil
	}
	h.vocab.once.Do(func() { h.vocab.v = tokens.NewVocab(h.opts.Tokenizer) })
	return tokens.New(g.grammar, h.vocab.v)
}

package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Constraint restricts which tokens a sample may take next: structured
// output (a grammar, a JSON schema) without the model knowing about it. The
// engine calls it on its own goroutine, once per constrained sample per
// step, so a Constraint is never shared between goroutines; n > 1 gives
// each sample its own Clone, taken at the fork point (before the first
// generated token).
type Constraint interface {
	// Allowed sets, in the bitset dst (one bit per vocabulary token, at
	// least (vocab+63)/64 words, cleared by the engine), the tokens that
	// may come next, and returns it. End-of-sequence tokens are the
	// engine's business (CanEnd); the bits a Constraint sets for them are
	// ignored.
	Allowed(dst []uint64) []uint64
	// Accept advances the state past the sampled token. False means the
	// token was not one Allowed named: a bug, and the request fails.
	Accept(tok int32) bool
	// CanEnd reports whether generation may end now (end-of-sequence).
	CanEnd() bool
	// Clone returns an independent copy of the state.
	Clone() Constraint
}

// ErrConstraintDead is the error of a constrained sample that reached a
// state where its constraint allows no token and generation cannot end
// (or may end, but the model has no end-of-sequence token): it fails
// instead of looping.
var ErrConstraintDead = errors.New("engine: the constraint allows no next token and generation may not end here")

// constraintScratch is the buffers masking reuses across samples and
// steps, so a constrained decode step allocates nothing for them.
type constraintScratch struct {
	bits []uint64
	row  []float32
	eos  []eosLogit
}

// eosLogit is an end-of-sequence token's biased logit, held aside while
// the mask is applied.
type eosLogit struct {
	id    int32
	logit float32
}

// biasOf is the sum of the biases bs gives tok.
func biasOf(bs []Bias, tok int32) float32 {
	var b float32
	for _, x := range bs {
		if x.ID == tok {
			b += x.Bias
		}
	}
	return b
}

// finite reports whether a masked logit can still be drawn.
func finite(l float32) bool { return !math.IsInf(float64(l), 0) && !math.IsNaN(float64(l)) }

// constrained returns the logits a constrained sample draws from: a copy
// of row with s's logit bias added and every token the constraint forbids
// at -Inf; end-of-sequence tokens are kept only while the constraint can
// end. The bias is folded in here (the returned row is to be sampled with
// no LogitBias) so that a bias that bans every allowed token is seen as a
// dead end instead of leaving nothing to draw from. The caller's row is
// untouched: it is what KeepLogits and the raw TopProbs report.
func (e *Engine) constrained(s *sequence, row []float32) ([]float32, error) {
	cs := &e.batch.cons
	words := (len(row) + 63) / 64
	if cap(cs.bits) < words {
		cs.bits = make([]uint64, words)
	}
	cs.bits = cs.bits[:words]
	clear(cs.bits)
	bits := s.con.Allowed(cs.bits)
	if len(bits) < words {
		return nil, fmt.Errorf("engine: the constraint's bitset has %d words, the vocabulary of %d tokens needs %d", len(bits), len(row), words)
	}
	canEnd := s.con.CanEnd()
	cs.row = growFloats(cs.row, len(row))
	out := cs.row
	copy(out, row)
	for _, b := range s.req.Sampling.LogitBias {
		if int(b.ID) < len(out) {
			out[b.ID] += b.Bias
		}
	}
	negInf := float32(math.Inf(-1))
	for w, word := range bits[:words] {
		if word == math.MaxUint64 {
			continue
		}
		for i := w * 64; i < min(w*64+64, len(out)); i++ {
			if word&(1<<(uint(i)&63)) == 0 {
				out[i] = negInf
			}
		}
	}
	// End-of-sequence tokens: the constraint's bits for them do not count.
	cs.eos = cs.eos[:0]
	for id := range e.eos {
		if int(id) < len(out) {
			cs.eos = append(cs.eos, eosLogit{id, row[id] + biasOf(s.req.Sampling.LogitBias, id)})
			out[id] = negInf
		}
	}
	live := slices.ContainsFunc(out, finite)
	// Generation may end where the constraint can, even with IgnoreEOS
	// when nothing else is left: the grammar's end outranks the request's
	// wish for a fixed length.
	if canEnd && (!s.req.IgnoreEOS || !live) {
		for _, l := range cs.eos {
			out[l.id] = l.logit
			live = live || finite(l.logit)
		}
	}
	if !live {
		return nil, ErrConstraintDead
	}
	return out, nil
}

// sampleConstrained draws s's next token from the masked row and feeds it
// to the constraint (an end-of-sequence token ends generation and is not
// fed). It returns the masked row (for post-sampling
// probabilities).
func (e *Engine) sampleConstrained(s *sequence, row []float32) (int32, []float32, error) {
	masked, err := e.constrained(s, row)
	if err != nil {
		return 0, nil, err
	}
	tok := unbiased(s.req.Sampling).Sample(masked, s.generated())
	if !e.eos[tok] && !s.con.Accept(tok) {
		return 0, nil, fmt.Errorf("engine: the constraint refused token %d that it allowed", tok)
	}
	return tok, masked, nil
}

// unbiased is smp without its logit bias, for a row it is already in.
func unbiased(smp Sampling) Sampling {
	smp.LogitBias = nil
	return smp
}

// failSample ends s with err at once: its last event goes into out, not
// the next step's.
func (e *Engine) failSample(s *sequence, err error, out []Output) []Output {
	e.retire(s)
	e.stats.Failed++
	return e.ended(out, s, "error", err)
}

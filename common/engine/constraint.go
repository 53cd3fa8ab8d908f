package engine

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
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
	cs.row = growFloats(cs.row, len(row))
	m := rowMask{bits: bits[:words], bias: s.req.Sampling.LogitBias, eos: e.eos, canEnd: s.con.CanEnd(), ignoreEOS: s.req.IgnoreEOS}
	var live bool
	cs.eos, live = m.apply(cs.row, row, cs.eos[:0])
	if !live {
		return nil, ErrConstraintDead
	}
	return cs.row, nil
}

// rowMask is what masking one row of logits needs: the allowed tokens,
// the request's logit bias, the end-of-sequence tokens and whether the
// constraint (and the request) let generation end now.
type rowMask struct {
	bits      []uint64
	bias      []Bias
	eos       map[int32]bool
	canEnd    bool
	ignoreEOS bool
}

// applyPlain is the plain masking, the reference apply is held to: copy
// the row, add the bias, -Inf every refused token, set the
// end-of-sequence tokens aside, then look for a finite logit. It writes
// into out (len(row)), holds end-of-sequence logits in held, and reports
// whether anything is left to draw.
func (m rowMask) applyPlain(out, row []float32, held []eosLogit) ([]eosLogit, bool) {
	copy(out, row)
	for _, b := range m.bias {
		if int(b.ID) < len(out) {
			out[b.ID] += b.Bias
		}
	}
	negInf := float32(math.Inf(-1))
	for w, word := range m.bits {
		if word == math.MaxUint64 {
			continue
		}
		for i := w * 64; i < min(w*64+64, len(out)); i++ {
			if word&(1<<(uint(i)&63)) == 0 {
				out[i] = negInf
			}
		}
	}
	return m.finish(out, row, held, slices.ContainsFunc)
}

// apply is applyPlain in one pass over the row, by 64-token words: a word
// of all ones is a copy, a word of zeros a fill of -Inf, only a mixed one
// goes bit by bit; the bias is added afterwards to the allowed tokens it
// names. Whether a finite logit is left is found on the way: the first
// allowed finite logit is remembered, and the row is searched again only
// when the bias or the end-of-sequence handling took that one away.
func (m rowMask) apply(out, row []float32, held []eosLogit) ([]eosLogit, bool) {
	negInf := float32(math.Inf(-1))
	first := -1 // the first allowed token with a finite logit
	for w, word := range m.bits {
		lo, hi := w*64, min(w*64+64, len(out))
		if lo >= hi {
			break
		}
		switch word {
		case math.MaxUint64:
			copy(out[lo:hi], row[lo:hi])
			if first < 0 {
				for i := lo; i < hi; i++ {
					if finite(row[i]) {
						first = i
						break
					}
				}
			}
		case 0:
			seg := out[lo:hi]
			for i := range seg {
				seg[i] = negInf
			}
		default:
			if hi-lo < 64 {
				word &= 1<<uint(hi-lo) - 1 // the last word: no bits past the row
			}
			if bits.OnesCount64(word) >= 32 {
				// Mostly allowed: copy, then -Inf the few refused.
				copy(out[lo:hi], row[lo:hi])
				for z := ^word; z != 0; z &= z - 1 {
					if i := lo + bits.TrailingZeros64(z); i < hi {
						out[i] = negInf
					}
				}
			} else {
				// Mostly refused: fill, then copy the few allowed.
				seg := out[lo:hi]
				for i := range seg {
					seg[i] = negInf
				}
				for x := word; x != 0; x &= x - 1 {
					i := lo + bits.TrailingZeros64(x)
					out[i] = row[i]
				}
			}
			for x := word; x != 0 && first < 0; x &= x - 1 {
				if i := lo + bits.TrailingZeros64(x); finite(row[i]) {
					first = i
				}
			}
		}
	}
	for _, b := range m.bias {
		if int(b.ID) < len(out) && m.bits[b.ID>>6]&(1<<(uint(b.ID)&63)) != 0 {
			out[b.ID] += b.Bias
		}
	}
	return m.finish(out, row, held, func(out []float32, f func(float32) bool) bool {
		// Bias and end-of-sequence only ever make a logit non-finite, so
		// nothing before first can have become finite.
		return first >= 0 && (f(out[first]) || slices.ContainsFunc(out[first+1:], f))
	})
}

// finish is the end-of-sequence handling both versions share: those
// tokens' own bits do not count; their biased logits are held aside and
// put back while the constraint can end (even with IgnoreEOS when nothing
// else is left: the grammar's end outranks the request's wish for a fixed
// length). anyFinite is how the version at hand finds a finite logit.
func (m rowMask) finish(out, row []float32, held []eosLogit, anyFinite func([]float32, func(float32) bool) bool) ([]eosLogit, bool) {
	negInf := float32(math.Inf(-1))
	for id := range m.eos {
		if int(id) < len(out) {
			held = append(held, eosLogit{id, row[id] + biasOf(m.bias, id)})
			out[id] = negInf
		}
	}
	live := anyFinite(out, finite)
	if m.canEnd && (!m.ignoreEOS || !live) {
		for _, l := range held {
			out[l.id] = l.logit
			live = live || finite(l.logit)
		}
	}
	return held, live
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

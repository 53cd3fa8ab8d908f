package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampling chooses the next token. The zero value is greedy decoding.
type Sampling struct {
	// Temperature divides the logits before the softmax; 0 means greedy.
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (nucleus sampling); 0 or 1 keeps all.
	TopP float64
	// TopK keeps only the TopK most likely tokens, before top-p (which
	// then measures their renormalised probabilities), as llama.cpp's
	// sampler chain orders them; 0 keeps all.
	TopK int
	// Seed makes sampling reproducible per request.
	Seed uint64
	// LogitBias is added to the logits before every other step (OpenAI's
	// and llama-server's logit_bias); -Inf bans a token. It depends only
	// on the request, so a request samples the same tokens in any batch.
	LogitBias []Bias
}

// Bias is one token's entry in Sampling.LogitBias.
type Bias struct {
	ID   int32
	Bias float32
}

// Greedy reports whether s always picks the most likely token of the
// model's own logits (a logit bias may move it elsewhere).
func (s Sampling) Greedy() bool { return s.Temperature == 0 && len(s.LogitBias) == 0 }

// Validate reports sampling settings that make no sense.
func (s Sampling) Validate() error {
	if s.Temperature < 0 || math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0) {
		return fmt.Errorf("temperature must be a finite number ≥ 0, have %v", s.Temperature)
	}
	if s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP) {
		return fmt.Errorf("top-p must be in [0, 1], have %v", s.TopP)
	}
	if s.TopK < 0 {
		return fmt.Errorf("top-k must be ≥ 0 (0: off), have %d", s.TopK)
	}
	for _, b := range s.LogitBias {
		if b.ID < 0 || math.IsNaN(float64(b.Bias)) || math.IsInf(float64(b.Bias), 1) {
			return fmt.Errorf("logit bias of token %d must be a number or -Inf, have %v", b.ID, b.Bias)
		}
	}
	return nil
}

// CheckVocab reports a logit bias on a token outside a vocabulary of n.
func (s Sampling) CheckVocab(n int) error {
	for _, b := range s.LogitBias {
		if int(b.ID) >= n {
			return fmt.Errorf("logit bias names token %d, outside the vocabulary of %d", b.ID, n)
		}
	}
	return nil
}

// Sample picks a token from logits. The random stream depends only on the
// seed and the output index, so a request samples the same tokens whatever
// batch it runs in, and after a preemption that recomputes it.
func (s Sampling) Sample(logits []float32, index int) int32 {
	logits = s.biased(logits)
	if s.Temperature == 0 {
		return argmax(logits)
	}
	cands, kept := s.nucleus(logits)
	rng := rand.New(rand.NewPCG(s.Seed, uint64(index)))
	r := rng.Float64() * kept
	for _, c := range cands {
		r -= c.p
		if r < 0 {
			return c.tok
		}
	}
	// r == kept after rounding: the last token that has weight (a
	// constraint's masked tokens have none and sort last).
	for i := len(cands) - 1; i > 0; i-- {
		if cands[i].p > 0 {
			return cands[i].tok
		}
	}
	return cands[0].tok
}

// SampledProbs is the distribution Sample draws from: the tokens it may
// pick, most likely first, with their probabilities after logit bias,
// temperature and top-p (llama-server's post_sampling_probs). Greedy
// decoding may pick one token, with probability 1. It returns tok's
// probability (0 if it could not be drawn) and at most n tokens.
func (s Sampling) SampledProbs(logits []float32, tok int32, n int) (float32, []TokenProb) {
	logits = s.biased(logits)
	if s.Temperature == 0 {
		best := argmax(logits)
		var prob float32
		if tok == best {
			prob = 1
		}
		if n < 1 {
			return prob, nil
		}
		return prob, []TokenProb{{ID: best, Prob: 1}}
	}
	cands, kept := s.nucleus(logits)
	var prob float32
	top := make([]TokenProb, 0, min(n, len(cands)))
	for i, c := range cands {
		p := float32(c.p / kept)
		if c.tok == tok {
			prob = p
		}
		if i < n && p > 0 {
			top = append(top, TokenProb{ID: c.tok, Prob: p})
		}
	}
	return prob, top
}

// biased returns logits with s.LogitBias added: a copy, since the
// caller's row may be reported (KeepLogits, TopProbs).
func (s Sampling) biased(logits []float32) []float32 {
	if len(s.LogitBias) == 0 {
		return logits
	}
	logits = slices.Clone(logits)
	for _, b := range s.LogitBias {
		if int(b.ID) < len(logits) {
			logits[b.ID] += b.Bias
		}
	}
	return logits
}

// cand is a token and its weight under temperature, not normalised.
type cand struct {
	tok int32
	p   float64
}

// nucleus returns the tokens a sampled draw may pick, most likely first
// (ties by token id, so the order is deterministic), and their total
// weight: all of them at temperature s.Temperature, or the TopK most
// likely, and of those top-p's smallest set whose probability reaches
// TopP.
func (s Sampling) nucleus(logits []float32) ([]cand, float64) {
	var cands []cand
	var sum float64
	if s.TopK > 0 && s.TopK < len(logits) {
		// The fast path (sampling_topk.go): the same TopK candidates,
		// without weighing the whole vocabulary into a sorted slice.
		cands = s.topK(logits)
		for _, c := range cands {
			sum += c.p
		}
	} else {
		cands, sum = s.weights(logits)
		slices.SortFunc(cands, byWeight)
	}
	keep := len(cands)
	if s.TopP > 0 && s.TopP < 1 {
		var cum float64
		for i, c := range cands {
			cum += c.p / sum
			if cum >= s.TopP {
				keep = i + 1
				break
			}
		}
	}
	var kept float64
	for _, c := range cands[:keep] {
		kept += c.p
	}
	return cands[:keep], kept
}

// weights returns every token with its weight at s.Temperature, in token
// order, and their sum.
func (s Sampling) weights(logits []float32) ([]cand, float64) {
	maxLogit := float64(logits[argmax(logits)])
	cands := make([]cand, len(logits))
	var sum float64
	for i, l := range logits {
		p := math.Exp((float64(l) - maxLogit) / s.Temperature)
		cands[i] = cand{int32(i), p}
		sum += p
	}
	return cands, sum
}

// byWeight orders candidates most likely first, ties by token id.
func byWeight(a, b cand) int {
	if c := cmp.Compare(b.p, a.p); c != 0 {
		return c
	}
	return cmp.Compare(a.tok, b.tok)
}

// argmax returns the index of the largest value, the smallest on ties.
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

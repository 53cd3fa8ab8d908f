package engine

import (
	"math"
	"slices"
)

// MaxTopProbs is the most alternatives Request.TopProbs may ask for per
// token: enough for every client seen (llama-server's n_probs, OpenAI's
// top_logprobs ≤ 20), small enough that the selection stays cheap.
const MaxTopProbs = 32

// TokenProb is one token and its probability under the model's raw
// distribution: the softmax of the logits, before temperature, top-p or
// any other sampling step (llama-server's n_probs reports these, not the
// post-sampling ones, unless asked otherwise).
type TokenProb struct {
	ID   int32
	Prob float32
}

// topProbs returns the probability of tok and the n most probable tokens
// of the softmax of logits, most probable first (ties by smaller id, so
// the list is a pure function of the logits). It is O(vocab × n) with
// n ≤ MaxTopProbs, one pass for the normaliser and one for the selection.
func topProbs(logits []float32, tok int32, n int) (float32, []TokenProb) {
	maxLogit := float64(logits[argmax(logits)])
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - maxLogit)
	}
	prob := func(l float32) float32 { return float32(math.Exp(float64(l)-maxLogit) / sum) }
	n = min(n, len(logits))
	top := make([]TokenProb, 0, n+1)
	// better orders by logit, then by id: the order of the final list.
	better := func(a, b TokenProb) bool {
		return a.Prob > b.Prob || a.Prob == b.Prob && a.ID < b.ID
	}
	for i, l := range logits {
		c := TokenProb{ID: int32(i), Prob: l} // compare raw logits; converted below
		if len(top) == n && !better(c, top[n-1]) {
			continue
		}
		j := len(top)
		if j < n {
			top = append(top, c)
		} else {
			j = n - 1
		}
		for j > 0 && better(c, top[j-1]) {
			top[j] = top[j-1]
			j--
		}
		top[j] = c
	}
	for i := range top {
		top[i].Prob = prob(top[i].Prob)
	}
	return prob(logits[tok]), slices.Clip(top)
}

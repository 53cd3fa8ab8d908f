package engine

import (
	"container/heap"
	"math"
	"slices"
)

// topK returns the s.TopK most likely tokens of logits with their weights
// at s.Temperature, most likely first, ties by token id: exactly the first
// TopK of weights sorted by byWeight, the plain way nucleus takes without
// a top-k.
//
// Sorting the whole vocabulary (128k–256k tokens) costs tens of
// milliseconds a token on a laptop core, more than a decode step of a
// small model; llama.cpp's default sampler keeps 40. So the weights go
// through a heap of the TopK best seen so far, and only those are sorted.
// A token enters only if it weighs more than the heap's lightest: tokens
// come in id order, so one that weighs the same would sort after it. And
// one whose logit is no higher than the lightest's cannot weigh more, so
// most tokens cost a comparison, not an exp.
func (s Sampling) topK(logits []float32) []cand {
	maxLogit := float64(logits[argmax(logits)])
	h := make(lightest, 0, s.TopK)
	for i, l := range logits {
		if len(h) == s.TopK && l <= logits[h[0].tok] {
			continue // weighs at most the lightest: exp is monotonic
		}
		p := math.Exp((float64(l) - maxLogit) / s.Temperature)
		switch {
		case len(h) < s.TopK:
			heap.Push(&h, cand{int32(i), p})
		case p > h[0].p:
			h[0] = cand{int32(i), p}
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h, byWeight)
	return h
}

// lightest is a heap of candidates whose root sorts last by byWeight.
type lightest []cand

func (h lightest) Len() int           { return len(h) }
func (h lightest) Less(i, j int) bool { return byWeight(h[i], h[j]) > 0 }
func (h lightest) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lightest) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *lightest) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

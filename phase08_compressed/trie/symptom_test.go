package trie

import (
	"math"
	"slices"
)

// outGap compares two runs: the largest logit difference over every
// request and position, and how many of want's requests generated other
// tokens in have.
func outGap(have, want map[int]*outcome) (gap float64, wrong int) {
	for id, w := range want {
		h := have[id]
		if h == nil || !slices.Equal(h.Tokens, w.Tokens) {
			wrong++
		}
		if h == nil {
			continue
		}
		for i := range min(len(h.Logits), len(w.Logits)) {
			for j := range min(len(h.Logits[i]), len(w.Logits[i])) {
				gap = math.Max(gap, math.Abs(float64(h.Logits[i][j])-float64(w.Logits[i][j])))
			}
		}
	}
	return gap, wrong
}

package metrics

import (
	"slices"
	"time"
)

// OptimalPrefill returns the fewest prompt tokens any engine with a
// block-aligned prefix cache of the given block size must compute for recs
// (which need Prompt and Output): a request can at best reuse the longest
// block-aligned prefix it shares with the tokens (prompt and output) of
// requests that arrived before it, and must compute at least one token to
// get logits. It is a lower bound: a real engine cannot reuse a prefix that
// an earlier request has not finished computing yet.
func OptimalPrefill(recs []RequestRecord, blockSize int) int {
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareDur(recs[a].Arrival, recs[b].Arrival) })

	total, added := 0, 0
	var seen [][]int32 // tokens of the requests that arrived earlier
	for k, i := range order {
		r := recs[i]
		shared := 0
		for _, s := range seen {
			shared = max(shared, commonPrefix(r.Prompt, s))
		}
		reuse := shared / blockSize * blockSize
		total += max(len(r.Prompt)-reuse, 1)
		// Requests arriving at the same instant cannot reuse each other.
		if k+1 == len(order) || recs[order[k+1]].Arrival != r.Arrival {
			for _, j := range order[added : k+1] {
				seen = append(seen, append(slices.Clone(recs[j].Prompt), recs[j].Output...))
			}
			added = k + 1
		}
	}
	return total
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func compareDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

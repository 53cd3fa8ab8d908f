package workload

import "math/rand/v2"

// Two independent random streams: one for sizes, one for token ids. Two
// workloads that draw the same sizes in the same order (prefix_caching and
// no_shared_prefix) then get identical prompt lengths, outputs and arrivals
// for a given seed, differing only in which tokens they share.
const (
	streamSizes  = 1
	streamTokens = 2
)

func newRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// uniform draws from [lo, hi].
func uniform(r *rand.Rand, lo, hi int) int {
	return lo + r.IntN(hi-lo+1)
}

// randTokens draws n token ids from [0, vocab).
func randTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

// distinctTokens draws n token ids that are pairwise different when
// n <= vocab, and merely random otherwise.
func distinctTokens(r *rand.Rand, n, vocab int) []int32 {
	if n > vocab {
		return randTokens(r, n, vocab)
	}
	if 2*n > vocab {
		perm := r.Perm(vocab)[:n]
		out := make([]int32, n)
		for i, v := range perm {
			out[i] = int32(v)
		}
		return out
	}
	seen := make(map[int32]bool, n)
	out := make([]int32, 0, n)
	for len(out) < n {
		t := int32(r.IntN(vocab))
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// uniqueTokens is n tokens starting with first.
func uniqueTokens(r *rand.Rand, first int32, n, vocab int) []int32 {
	return append([]int32{first}, randTokens(r, n-1, vocab)...)
}

// concat joins token slices into a fresh slice, so no two prompts alias the
// same backing array.
func concat(parts ...[]int32) []int32 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]int32, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

package metrics

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 <= p <= 100) of xs using the
// nearest-rank method: the smallest value such that at least p percent of the
// samples are less than or equal to it, i.e. the element of rank
// ceil(p/100 * n) in sorted order (rank 1 for p = 0).
//
// Nearest rank always returns an observed latency, never an interpolated one
// that no request experienced, and on small runs p99 is simply the maximum.
// It returns 0 for no samples. xs is not modified.
func Percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []time.Duration, p float64) time.Duration {
	n := len(s)
	if n == 0 {
		return 0
	}
	// Multiply before dividing so whole-number percentiles of whole-number
	// counts stay exact in floating point.
	rank := int(math.Ceil(p * float64(n) / 100))
	rank = max(1, min(rank, n))
	return s[rank-1]
}

// Stats summarises one latency distribution.
type Stats struct {
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
	Mean time.Duration `json:"mean_ns"`
	Max  time.Duration `json:"max_ns"`
	// N is the number of samples.
	N int `json:"n"`
}

// NewStats computes Stats over xs (which it does not modify).
func NewStats(xs []time.Duration) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return Stats{
		P50:  percentileSorted(s, 50),
		P99:  percentileSorted(s, 99),
		Mean: sum / time.Duration(len(s)),
		Max:  s[len(s)-1],
		N:    len(s),
	}
}

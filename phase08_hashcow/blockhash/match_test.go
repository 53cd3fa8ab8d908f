package blockhash

import (
	"slices"
	"testing"
)

// TestSameTokensAgreesWithSlicesEqual checks the walk's word-wise compare
// against slices.Equal for every block length up to 17 (odd lengths end in
// a lone token), with every bit of every token flipped in turn, and for
// blocks of different lengths.
func TestSameTokensAgreesWithSlicesEqual(t *testing.T) {
	for n := range 18 {
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(i*7919 - 3)
		}
		if !sameTokens(a, slices.Clone(a)) {
			t.Fatalf("n=%d: equal blocks compare unequal", n)
		}
		if n > 0 && sameTokens(a, a[:n-1]) {
			t.Fatalf("n=%d: blocks of different lengths compare equal", n)
		}
		for i := range a {
			for bit := range 32 {
				b := slices.Clone(a)
				b[i] ^= 1 << bit
				if sameTokens(a, b) != slices.Equal(a, b) {
					t.Fatalf("n=%d, bit %d of token %d flipped: sameTokens says equal", n, bit, i)
				}
			}
		}
	}
}

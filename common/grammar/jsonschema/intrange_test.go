package jsonschema

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"kvlab/common/grammar"
)

// TestIntRangeAgainstArithmetic: the grammar for lo..hi takes exactly the
// decimal spellings of the integers from lo to hi, checked number by number
// around and inside the range (strconv spells the truth).
func TestIntRangeAgainstArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	ranges := [][2]int64{{0, 0}, {-5, -5}, {0, 9}, {-12, 207}, {15, 300}, {-123, 42}, {999, 1000}, {-1000, -999},
		{1, 1000000}, {123456, 123999}, {-maxInt, maxInt}, {9999999999999990, maxInt}, {-maxInt, -9999999999999990}}
	for range 60 {
		a, b := rng.Int64N(4000)-2000, rng.Int64N(4000)-2000
		ranges = append(ranges, [2]int64{min(a, b), max(a, b)})
	}
	for _, r := range ranges {
		lo, hi := r[0], r[1]
		g, err := grammar.Parse("root ::= " + intRange(lo, hi) + "\n")
		if err != nil {
			t.Fatalf("%d..%d: %v", lo, hi, err)
		}
		check := func(n int64) {
			m := g.NewMatcher()
			got := m.Accept([]byte(strconv.FormatInt(n, 10))) && m.CanEnd()
			if want := lo <= n && n <= hi; got != want {
				t.Errorf("%d..%d: %d accepted %v, want %v", lo, hi, n, got, want)
			}
		}
		for n := lo - 30; n <= hi+30; n++ {
			if n-lo > 30 && hi-n > 30 { // inside, far from both ends: sample
				n += rng.Int64N(max(1, (hi-n)/8))
			}
			check(n)
		}
		for _, bad := range []string{"-0", "00", "01", "+1", ""} {
			if m := g.NewMatcher(); m.Accept([]byte(bad)) && m.CanEnd() {
				t.Errorf("%d..%d: %q accepted", lo, hi, bad)
			}
		}
	}
}

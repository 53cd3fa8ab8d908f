package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func msList(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	oneToTen := msList(10, 9, 8, 7, 6, 5, 4, 3, 2, 1) // unsorted on purpose
	tests := []struct {
		name string
		xs   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"single p50", msList(7), 50, 7 * time.Millisecond},
		{"single p99", msList(7), 99, 7 * time.Millisecond},
		{"p0 is the minimum", oneToTen, 0, 1 * time.Millisecond},
		{"p10 of 1..10", oneToTen, 10, 1 * time.Millisecond},
		{"p50 of 1..10", oneToTen, 50, 5 * time.Millisecond},
		{"p51 of 1..10 rounds the rank up", oneToTen, 51, 6 * time.Millisecond},
		{"p90 of 1..10", oneToTen, 90, 9 * time.Millisecond},
		{"p99 of 1..10 is the maximum", oneToTen, 99, 10 * time.Millisecond},
		{"p100 of 1..10", oneToTen, 100, 10 * time.Millisecond},
		{"p50 of four values", msList(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p75 of four values", msList(1, 2, 3, 4), 75, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := Percentile(tt.xs, tt.p)
			assert.Equal(t, tt.want, have, "have %v; want %v", have, tt.want)
		})
	}
}

func TestPercentileDoesNotModifyInput(t *testing.T) {
	xs := msList(3, 1, 2)
	Percentile(xs, 50)
	assert.Equal(t, msList(3, 1, 2), xs)
}

func TestNewStats(t *testing.T) {
	have := NewStats(msList(4, 1, 3, 2))
	want := Stats{
		P50:  2 * time.Millisecond,
		P99:  4 * time.Millisecond,
		Mean: 2500 * time.Microsecond,
		Max:  4 * time.Millisecond,
		N:    4,
	}
	assert.Equal(t, want, have, "have %v; want %v", have, want)
	assert.Equal(t, Stats{}, NewStats(nil))
}

package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOptimalPrefill(t *testing.T) {
	sys := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} // 10 shared tokens
	rec := func(arrival int, prompt, output []int32) RequestRecord {
		return RequestRecord{Arrival: time.Duration(arrival) * time.Millisecond, Prompt: prompt, Output: output}
	}
	for _, tc := range []struct {
		name string
		recs []RequestRecord
		bs   int
		want int
	}{
		{"first request computes everything", []RequestRecord{rec(0, append(sys, 50), nil)}, 4, 11},
		{"later requests reuse whole blocks of the shared prefix", []RequestRecord{
			rec(0, append(sys, 50, 51), nil),
			rec(10, append(sys, 60, 61, 62), nil), // shares 10 → reuses 8, computes 13-8
			rec(20, append(sys, 70), nil),         // computes 11-8
		}, 4, 12 + 5 + 3},
		{"a full hit still computes one token", []RequestRecord{
			rec(0, sys[:8], nil),
			rec(10, sys[:8], nil),
		}, 4, 8 + 1},
		{"simultaneous arrivals cannot reuse each other", []RequestRecord{
			rec(0, sys, nil),
			rec(0, sys, nil),
		}, 2, 20},
		{"a follow-up reuses the previous answer", []RequestRecord{
			rec(0, sys[:4], []int32{90, 91, 92, 93}),
			rec(10, []int32{1, 2, 3, 4, 90, 91, 92, 93, 7}, nil), // shares 8 → computes 1
		}, 4, 4 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			have := OptimalPrefill(tc.recs, tc.bs)
			assert.Equal(t, tc.want, have, "have %d; want %d", have, tc.want)
		})
	}
}

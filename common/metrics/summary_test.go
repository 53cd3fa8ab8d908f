package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// record builds a completed request whose tokens arrive at the given
// millisecond offsets.
func record(id int, arrivalMS int, promptLen, cached int, tokenMS ...int) RequestRecord {
	r := RequestRecord{
		ID:           id,
		PromptLen:    promptLen,
		CachedTokens: cached,
		Arrival:      time.Duration(arrivalMS) * time.Millisecond,
		OutputLen:    len(tokenMS),
		TokenTimes:   msList(tokenMS...),
	}
	if len(tokenMS) > 0 {
		r.FirstToken = r.TokenTimes[0]
		r.Finish = r.TokenTimes[len(r.TokenTimes)-1]
	}
	return r
}

func TestSummaryLatencies(t *testing.T) {
	run := &Run{
		Name: "x",
		Wall: 2 * time.Second,
		Requests: []RequestRecord{
			record(0, 0, 10, 0, 100, 110, 130),  // TTFT 100, gaps 10 20, e2e 130
			record(1, 50, 10, 0, 250, 290),      // TTFT 200, gap 40, e2e 240
			{ID: 2, PromptLen: 10, Err: "boom"}, // excluded from latencies
		},
	}
	s := run.Summary()

	assert.Equal(t, "x", s.Name)
	assert.Equal(t, 3, s.Requests)
	assert.Equal(t, 2, s.Completed)
	assert.Equal(t, 1, s.Failed)
	assert.Equal(t, Stats{P50: 100 * time.Millisecond, P99: 200 * time.Millisecond, Mean: 150 * time.Millisecond, Max: 200 * time.Millisecond, N: 2}, s.TTFT)
	assert.Equal(t, Stats{P50: 130 * time.Millisecond, P99: 240 * time.Millisecond, Mean: 185 * time.Millisecond, Max: 240 * time.Millisecond, N: 2}, s.E2E)
	assert.Equal(t, 5, s.OutputTokens)
	assert.InDelta(t, 2.5, s.OutputTokensPerSec, 1e-9)
	assert.InDelta(t, 1.0, s.RequestsPerSec, 1e-9)
}

func TestSummaryITLPoolsAllGaps(t *testing.T) {
	// Gaps 10,10,10 from one request and 100 from the other: pooling weighs
	// each gap equally, so p50 is 10ms and the mean is 130/4 ms. A mean of
	// per-request means would give (10+100)/2 = 55ms instead.
	run := &Run{Requests: []RequestRecord{
		record(0, 0, 1, 0, 10, 20, 30, 40),
		record(1, 0, 1, 0, 10, 110),
	}}
	have := run.Summary().ITL
	want := Stats{P50: 10 * time.Millisecond, P99: 100 * time.Millisecond, Mean: 32500 * time.Microsecond, Max: 100 * time.Millisecond, N: 4}
	assert.Equal(t, want, have, "have %v; want %v", have, want)
}

func TestSummaryHitRate(t *testing.T) {
	tests := []struct {
		name string
		run  Run
		want float64
	}{
		{"no prompt tokens", Run{}, 0},
		{"from records", Run{Requests: []RequestRecord{
			record(0, 0, 100, 0, 1), record(1, 0, 100, 50, 1),
		}}, 0.25},
		{"engine stats win when present", Run{
			Requests: []RequestRecord{record(0, 0, 100, 0, 1)},
			Engine:   EngineStats{PromptTokens: 200, CachedTokens: 150},
		}, 0.75},
		{"engine cached tokens over recorded prompts", Run{
			Requests: []RequestRecord{record(0, 0, 100, 0, 1), record(1, 0, 100, 0, 1)},
			Engine:   EngineStats{CachedTokens: 64},
		}, 0.32},
		{"clamped to one", Run{
			Requests: []RequestRecord{record(0, 0, 10, 0, 1)},
			Engine:   EngineStats{CachedTokens: 30},
		}, 1},
		{"everything cached", Run{Requests: []RequestRecord{record(0, 0, 8, 8, 1)}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := tt.run.Summary().HitRate
			assert.InDelta(t, tt.want, have, 1e-12, "have %v; want %v", have, tt.want)
		})
	}
}

func TestSummaryZeroWall(t *testing.T) {
	s := (&Run{Requests: []RequestRecord{record(0, 0, 1, 0, 1)}}).Summary()
	require.Zero(t, s.OutputTokensPerSec)
	require.Zero(t, s.RequestsPerSec)
}

package workload

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitingEngine is a remote server seen from its client: tokens appear on
// their own, token k of a request latency×(k+1) after its submission, each
// stamped with that time. Run must wait on it, never step it.
type waitingEngine struct {
	clock   *fakeClock
	latency time.Duration
	pending []Token // ordered by At
	waits   []time.Duration
	stepped bool
}

func (e *waitingEngine) Submit(id int, _ []int32, maxTokens int) error {
	now := e.clock.Now()
	for k := range maxTokens {
		e.pending = append(e.pending, Token{ID: id, Token: int32(k), Done: k == maxTokens-1,
			At: now.Add(time.Duration(k+1) * e.latency)})
	}
	slices.SortStableFunc(e.pending, func(a, b Token) int { return a.At.Compare(b.At) })
	return nil
}

func (e *waitingEngine) Step() []Token { e.stepped = true; return nil }
func (e *waitingEngine) Busy() bool    { return len(e.pending) > 0 }

func (e *waitingEngine) Wait(d time.Duration) []Token {
	e.waits = append(e.waits, d)
	next := e.pending[0].At
	if d >= 0 && e.clock.Now().Add(d).Before(next) {
		e.clock.Sleep(d)
		return nil
	}
	if gap := next.Sub(e.clock.Now()); gap > 0 {
		e.clock.Sleep(gap)
	}
	// Hand back the ready events a little late, as a busy driver would
	// collect them: the records must still carry the stamped times.
	e.clock.Sleep(time.Millisecond)
	n := 0
	for n < len(e.pending) && !e.pending[n].At.After(e.clock.Now()) {
		n++
	}
	out := slices.Clone(e.pending[:n])
	e.pending = e.pending[n:]
	return out
}

func TestRunWaitsOnAWaiterAndKeepsItsTimestamps(t *testing.T) {
	reqs := []Request{
		{ID: 0, Prompt: []int32{1, 2}, MaxTokens: 3, Arrival: 0},
		{ID: 1, Prompt: []int32{3, 4}, MaxTokens: 2, Arrival: 25 * time.Millisecond},
	}
	eng := &waitingEngine{clock: newFakeClock(), latency: 10 * time.Millisecond}
	run, err := Run(eng, reqs, RunOptions{Clock: eng.clock})
	require.NoError(t, err)
	assert.False(t, eng.stepped, "a Waiter is waited on, not stepped")

	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	r0, r1 := run.Requests[0], run.Requests[1]
	assert.Equal(t, []time.Duration{ms(10), ms(20), ms(30)}, r0.TokenTimes, "the engine's stamps, not the collection times")
	assert.Equal(t, ms(10), r0.FirstToken)
	assert.Equal(t, ms(30), r0.Finish)
	assert.Equal(t, ms(25), r1.Arrival)
	assert.Equal(t, []time.Duration{ms(35), ms(45)}, r1.TokenTimes)
	assert.Equal(t, ms(45), r1.Finish)

	// The first wait is bounded by request 1's arrival; once everything is
	// released the driver waits without a limit.
	require.NotEmpty(t, eng.waits)
	assert.Equal(t, ms(25), eng.waits[0])
	assert.Equal(t, time.Duration(-1), eng.waits[len(eng.waits)-1])
	// Request 1 was submitted at its arrival, not after request 0's tokens.
	assert.Equal(t, ms(10), run.Summary().TTFT.P50)
}

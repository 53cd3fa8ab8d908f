package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With a StepClock, arrivals interleave with steps by the step count alone:
// request 1 arrives 12 ms in, so with 5 ms steps it is submitted after the
// third step, whatever the machine's speed, and every time is exact.
func TestStepClockInterleavesArrivalsWithSteps(t *testing.T) {
	reqs := []Request{
		{ID: 0, Prompt: []int32{1}, MaxTokens: 4, Arrival: 0},
		{ID: 1, Prompt: []int32{2}, MaxTokens: 2, Arrival: 12 * time.Millisecond},
		{ID: 2, Prompt: []int32{3}, MaxTokens: 1, Arrival: time.Second},
	}
	for range 2 {
		// The fake engine's own clock never moves: only the step clock does.
		eng := &fakeEngine{clock: newFakeClock()}
		run, err := Run(eng, reqs, RunOptions{Clock: NewStepClock(5 * time.Millisecond)})
		require.NoError(t, err)
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{5 * ms, 10 * ms, 15 * ms, 20 * ms}, run.Requests[0].TokenTimes)
		// The clock reads 10 ms after step 2, before request 1's arrival,
		// so it is submitted after step 3 (15 ms) and produces at 20 and
		// 25 ms.
		assert.Equal(t, []time.Duration{20 * ms, 25 * ms}, run.Requests[1].TokenTimes)
		// The engine idles after 25 ms: the clock jumps to the next arrival.
		assert.Equal(t, []time.Duration{time.Second + 5*ms}, run.Requests[2].TokenTimes)
		assert.Equal(t, time.Second+5*ms, run.Wall)
	}
}

func TestStepClockRefusesAWaiter(t *testing.T) {
	eng := selfDrivenEngine{&fakeEngine{clock: newFakeClock()}}
	_, err := Run(eng, []Request{{ID: 0, Prompt: []int32{1}, MaxTokens: 1}}, RunOptions{Clock: NewStepClock(time.Millisecond)})
	assert.ErrorContains(t, err, "virtual")
}

type selfDrivenEngine struct{ *fakeEngine }

func (e selfDrivenEngine) Wait(time.Duration) []Token { return e.Step() }

func TestParseClock(t *testing.T) {
	wall, err := ParseClock("wall")
	require.NoError(t, err)
	assert.Nil(t, wall())
	step, err := ParseClock("step:5ms")
	require.NoError(t, err)
	a, b := step(), step()
	require.IsType(t, &StepClock{}, a)
	assert.Equal(t, 5*time.Millisecond, a.(*StepClock).PerStep)
	assert.NotSame(t, a, b, "each run gets a clock of its own")
	for _, bad := range []string{"step:", "step:0s", "step:-1ms", "virtual", "step:5"} {
		_, err := ParseClock(bad)
		assert.Error(t, err, bad)
	}
}

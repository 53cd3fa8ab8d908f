package workload

import (
	"fmt"
	"strings"
	"time"
)

// Clock is the driver's source of time. Tests inject a fake one so that
// timing assertions are exact and nothing really sleeps.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// StepObserver is optionally implemented by a Clock that keeps virtual
// time: Run calls Stepped after every engine step, before it stamps the
// step's tokens.
type StepObserver interface {
	Stepped()
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { time.Sleep(d) }

// StepClock is a virtual clock that advances PerStep for every engine step
// and stands still while the engine computes. Sleeping jumps to the wake-up
// time at once. With it, which requests have arrived before each step
// depends only on the step count, never on how fast the machine is, so a
// run's token counts, step counts, preemptions and even its latencies
// (measured in virtual time) are the same on every machine and every run.
//
// The latencies it reports are a model of time, not a measurement: every
// step costs PerStep, a 512-token prefill step and a one-token decode step
// alike.
type StepClock struct {
	PerStep time.Duration
	now     time.Time
}

// NewStepClock returns a StepClock at an arbitrary fixed epoch.
func NewStepClock(perStep time.Duration) *StepClock {
	return &StepClock{PerStep: perStep, now: time.Unix(0, 0)}
}

// Now returns the virtual time.
func (c *StepClock) Now() time.Time { return c.now }

// Sleep advances the virtual time by d without waiting.
func (c *StepClock) Sleep(d time.Duration) {
	if d > 0 {
		c.now = c.now.Add(d)
	}
}

// Stepped advances the virtual time by one step.
func (c *StepClock) Stepped() { c.now = c.now.Add(c.PerStep) }

// ParseClock parses a clock flag: "wall" (or empty) for the wall clock, or
// "step:DURATION" (e.g. "step:5ms") for a StepClock with that step. It
// returns a constructor, since each run needs a clock of its own; the
// constructor returns nil for the wall clock (Run's default).
func ParseClock(s string) (func() Clock, error) {
	switch {
	case s == "" || s == "wall":
		return func() Clock { return nil }, nil
	case strings.HasPrefix(s, "step:"):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "step:"))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("-clock %q: want step:DURATION with a positive duration, e.g. step:5ms", s)
		}
		return func() Clock { return NewStepClock(d) }, nil
	}
	return nil, fmt.Errorf("-clock %q: want wall or step:DURATION (e.g. step:5ms)", s)
}

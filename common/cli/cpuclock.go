package cli

import (
	"runtime"
	"time"
)

// cpuClock is the chunking command's -clock cpu: a virtual clock that
// advances, at every engine step, by the CPU time the process spent since
// the step before, and jumps over idle waits as workload.StepClock does.
// On one core (GOMAXPROCS=1, which the command sets) a step's CPU time is
// what the step took, less whatever other work on the machine took the
// core meanwhile: the times of a dedicated core, measured, not modelled.
// A step of 4,096 prompt tokens costs what it costs, which a StepClock,
// charging every step alike, cannot show.
type cpuClock struct {
	now  time.Time
	last time.Duration // the process's CPU time at the last step
}

func newCPUClock() *cpuClock {
	return &cpuClock{now: time.Unix(0, 0), last: processCPUTime()}
}

// Now returns the virtual time.
func (c *cpuClock) Now() time.Time { return c.now }

// Sleep advances the virtual time by d without waiting.
func (c *cpuClock) Sleep(d time.Duration) {
	if d > 0 {
		c.now = c.now.Add(d)
	}
	// What the driver spent before sleeping is not the next step's.
	c.last = processCPUTime()
}

// Stepped advances the virtual time by the CPU time of the step just run.
func (c *cpuClock) Stepped() {
	t := processCPUTime()
	c.now = c.now.Add(t - c.last)
	c.last = t
}

// oneCore sets GOMAXPROCS to 1 and returns what restores it: with one
// thread running Go code, the process's CPU time is one core's busy time.
func oneCore() (restore func()) {
	prev := runtime.GOMAXPROCS(1)
	return func() { runtime.GOMAXPROCS(prev) }
}

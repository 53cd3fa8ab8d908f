package workload

import "time"

// Clock is the driver's source of time. Tests inject a fake one so that
// timing assertions are exact and nothing really sleeps.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { time.Sleep(d) }

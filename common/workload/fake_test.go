package workload

import (
	"slices"
	"time"
)

// fakeClock advances only when told to, so timings in tests are exact.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock             { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func (c *fakeClock) Now() time.Time        { return c.t }
func (c *fakeClock) Sleep(d time.Duration) { c.t = c.t.Add(d) }

type submission struct {
	id        int
	prompt    []int32
	maxTokens int
	at        time.Time
}

type fakeReq struct {
	id, left, produced int
}

// fakeEngine emits one token per running request per step, the token being
// the request's ID, and takes stepTime of fake time per step.
type fakeEngine struct {
	clock    *fakeClock
	stepTime time.Duration
	reject   map[int]error // refused at Submit
	failAt   map[int]int   // fails with an error event after this many tokens
	cached   map[int]int   // reported through CacheReporter
	running  []*fakeReq
	log      []submission
	maxBatch int
}

func (e *fakeEngine) Submit(id int, prompt []int32, maxTokens int) error {
	if err := e.reject[id]; err != nil {
		return err
	}
	e.log = append(e.log, submission{id, slices.Clone(prompt), maxTokens, e.clock.Now()})
	e.running = append(e.running, &fakeReq{id: id, left: maxTokens})
	return nil
}

func (e *fakeEngine) Step() []Token {
	e.clock.Sleep(e.stepTime)
	e.maxBatch = max(e.maxBatch, len(e.running))
	var out []Token
	keep := e.running[:0]
	for _, r := range e.running {
		if n, ok := e.failAt[r.id]; ok && r.produced == n {
			out = append(out, Token{ID: r.id, Err: errBoom})
			continue
		}
		r.produced++
		r.left--
		out = append(out, Token{ID: r.id, Token: int32(r.id), Done: r.left == 0})
		if r.left > 0 {
			keep = append(keep, r)
		}
	}
	e.running = keep
	return out
}

func (e *fakeEngine) Busy() bool { return len(e.running) > 0 }

type errString string

func (e errString) Error() string { return string(e) }

const errBoom = errString("boom")

// cachingEngine adds CacheReporter to fakeEngine.
type cachingEngine struct{ *fakeEngine }

func (e cachingEngine) CachedTokens(id int) int { return e.cached[id] }

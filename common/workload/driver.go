package workload

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"kvlab/common/metrics"
)

// RunOptions configures Run. The zero value is usable.
type RunOptions struct {
	// Name labels the resulting metrics.Run.
	Name string
	// Progress receives a progress bar; nil for none.
	Progress io.Writer
	// Clock defaults to the wall clock. A clock that implements
	// StepObserver (StepClock) keeps virtual time: it needs an engine that
	// Run steps, not a Waiter, and the engine's own timestamps (Token.At)
	// are ignored.
	Clock Clock
}

type reqStatus int

const (
	// waiting: a follow-up whose previous turn has not finished, so its
	// release time is still unknown.
	waiting reqStatus = iota
	scheduled
	submitted
	finished
)

type reqState struct {
	req      *Request
	rec      *metrics.RequestRecord
	status   reqStatus
	release  time.Duration
	prompt   []int32
	output   []int32
	children []int
}

// Run replays reqs against eng in open loop and records what happened.
//
// Arrival times are fixed in advance and never wait on the engine. Between
// steps Run submits every request whose release time has passed; a record's
// Arrival is that release time, not the submit time, so time spent waiting
// for the engine to come round counts against it. When the engine is idle
// Run sleeps until the next release. Token timestamps are taken right after
// the Step that produced them, unless the engine stamped them itself
// (Token.At). An engine that implements Waiter is waited on, up to the next
// release, instead of stepped.
//
// A request the engine rejects, or that ends with an error event, is
// recorded with Err set; the others are unaffected, and a follow-up of a
// failed turn fails too. Run itself fails only on malformed input (duplicate
// IDs, a FollowUp naming an unknown or circular Prev) or an engine that
// breaks the Token convention.
//
// Records are in the order of reqs. EngineStats is left for the caller.
func Run(eng Engine, reqs []Request, opt RunOptions) (*metrics.Run, error) {
	clock := opt.Clock
	if clock == nil {
		clock = realClock{}
	}
	observer, virtual := clock.(StepObserver)
	if _, waits := eng.(Waiter); virtual && waits {
		return nil, errors.New("workload: a virtual (step) clock needs an engine that Run steps; this one makes progress on its own (Waiter)")
	}
	run := &metrics.Run{Name: opt.Name, Requests: make([]metrics.RequestRecord, len(reqs))}
	states, index, err := planRequests(reqs, run.Requests)
	if err != nil {
		return nil, err
	}
	cache, _ := eng.(CacheReporter)

	var due releaseQueue
	for i, s := range states {
		if s.req.FollowUp == nil {
			s.status, s.release = scheduled, s.req.Arrival
			due.push(i, s.release)
		}
	}

	progress := metrics.NewProgress(opt.Progress, len(reqs))
	defer progress.Finish()
	start := clock.Now()
	since := func() time.Duration { return clock.Now().Sub(start) }
	left := len(reqs)

	finish := func(i int, at time.Duration, errMsg string) {
		s := states[i]
		if cache != nil && s.status == submitted {
			s.rec.CachedTokens = cache.CachedTokens(s.req.ID)
		}
		s.status = finished
		s.rec.Finish, s.rec.Err = at, errMsg
		left--
		progress.Add(1)
		for _, c := range s.children {
			cs := states[c]
			cs.status = scheduled
			cs.release = max(cs.req.Arrival, at+cs.req.FollowUp.Think)
			due.push(c, cs.release)
		}
	}

	submit := func(i int) {
		s := states[i]
		s.rec.Arrival = s.release
		if f := s.req.FollowUp; f != nil {
			prev := states[index[f.Prev]]
			if prev.rec.Err != "" {
				finish(i, since(), fmt.Sprintf("previous turn %d failed: %s", f.Prev, prev.rec.Err))
				return
			}
			s.prompt = concat(prev.prompt, prev.output, f.UserTokens)
		} else {
			s.prompt = slices.Clone(s.req.Prompt)
		}
		s.rec.PromptLen = len(s.prompt)
		s.rec.Prompt = s.prompt
		if err := eng.Submit(s.req.ID, s.prompt, s.req.MaxTokens); err != nil {
			finish(i, since(), err.Error())
			return
		}
		s.status = submitted
	}

	for left > 0 {
		now := since()
		for due.Len() > 0 && due.peek() <= now {
			submit(due.pop())
		}
		if left == 0 {
			// The last releases all failed at submission.
			break
		}
		if eng.Busy() {
			var events []Token
			if w, ok := eng.(Waiter); ok {
				wait := time.Duration(-1)
				if due.Len() > 0 {
					wait = max(due.peek()-now, 0)
				}
				events = w.Wait(wait)
			} else {
				events = eng.Step()
			}
			if virtual {
				observer.Stepped()
			}
			stepped := since()
			for _, ev := range events {
				i, ok := index[ev.ID]
				if !ok {
					return nil, fmt.Errorf("workload: engine produced a token for unknown request %d", ev.ID)
				}
				s := states[i]
				if s.status != submitted {
					return nil, fmt.Errorf("workload: engine produced a token for request %d, which is not running", ev.ID)
				}
				at := stepped
				if !ev.At.IsZero() && !virtual {
					at = ev.At.Sub(start)
				}
				if ev.Err != nil {
					finish(i, at, ev.Err.Error())
					continue
				}
				if len(s.output) == 0 {
					s.rec.FirstToken = at
				}
				s.output = append(s.output, ev.Token)
				s.rec.Output = s.output
				s.rec.TokenTimes = append(s.rec.TokenTimes, at)
				s.rec.OutputLen++
				if ev.Done {
					finish(i, at, "")
				}
			}
			continue
		}
		if due.Len() > 0 {
			if wait := due.peek() - now; wait > 0 {
				clock.Sleep(wait)
			}
			continue
		}
		// Idle with nothing left to release: whatever is still running was
		// dropped by the engine. Failing those releases their follow-ups.
		lost := false
		for i, s := range states {
			if s.status == submitted {
				finish(i, now, "engine went idle without finishing the request")
				lost = true
			}
		}
		if !lost {
			return nil, errors.New("workload: requests left that can never be released")
		}
	}
	run.Wall = since()
	return run, nil
}

// planRequests checks reqs and links every follow-up to its previous turn.
func planRequests(reqs []Request, recs []metrics.RequestRecord) ([]*reqState, map[int]int, error) {
	index := make(map[int]int, len(reqs))
	states := make([]*reqState, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if _, dup := index[r.ID]; dup {
			return nil, nil, fmt.Errorf("workload: duplicate request ID %d", r.ID)
		}
		index[r.ID] = i
		recs[i].ID = r.ID
		states[i] = &reqState{req: r, rec: &recs[i]}
	}
	for i, s := range states {
		f := s.req.FollowUp
		if f == nil {
			continue
		}
		p, ok := index[f.Prev]
		if !ok {
			return nil, nil, fmt.Errorf("workload: request %d follows unknown request %d", s.req.ID, f.Prev)
		}
		states[p].children = append(states[p].children, i)
	}
	// Each request has at most one previous turn, so a cycle is a walk
	// back along Prev that never reaches a first turn.
	for _, s := range states {
		cur := s
		for steps := 0; cur.req.FollowUp != nil; steps++ {
			if steps == len(states) {
				return nil, nil, fmt.Errorf("workload: request %d is part of a FollowUp cycle", s.req.ID)
			}
			cur = states[index[cur.req.FollowUp.Prev]]
		}
	}
	return states, index, nil
}

// releaseQueue orders scheduled requests by release time, then by position
// in the workload so that simultaneous arrivals keep their order.
type releaseQueue struct{ items []releaseItem }

type releaseItem struct {
	at time.Duration
	i  int
}

func (q *releaseQueue) Len() int { return len(q.items) }
func (q *releaseQueue) Less(a, b int) bool {
	x, y := q.items[a], q.items[b]
	return x.at < y.at || (x.at == y.at && x.i < y.i)
}
func (q *releaseQueue) Swap(a, b int) { q.items[a], q.items[b] = q.items[b], q.items[a] }
func (q *releaseQueue) Push(x any)    { q.items = append(q.items, x.(releaseItem)) }
func (q *releaseQueue) Pop() any {
	last := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return last
}

func (q *releaseQueue) push(i int, at time.Duration) { heap.Push(q, releaseItem{at: at, i: i}) }
func (q *releaseQueue) pop() int                     { return heap.Pop(q).(releaseItem).i }
func (q *releaseQueue) peek() time.Duration          { return q.items[0].at }

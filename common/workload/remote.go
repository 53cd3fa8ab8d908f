package workload

import (
	"context"
	"sync"
	"time"
)

// Remote is the bookkeeping of an Engine whose requests run elsewhere, on a
// server over HTTP: Start runs each request on its own goroutine, so
// arrivals never wait for the server (an open loop), the events the
// goroutine reads wait in a queue (Push) until Run takes them (Step, Wait),
// and the prompt tokens the server reported cached are kept per request
// (SetCached, CachedTokens). An engine embeds it and adds how it talks to
// its server; Remote provides Step, Busy, Wait and CachedTokens
// (workload.Waiter, workload.CacheReporter).
type Remote struct {
	ctx    context.Context // cancelled by Close: every request in flight ends
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	ready   []Token       // events read and not yet handed to Run
	open    int           // requests started whose last event Run has not taken
	cached  map[int]int   // prompt tokens found cached, per request
	arrived chan struct{} // signalled (without blocking) when ready grows
}

// NewRemote returns a Remote whose requests end when parent ends or Close
// is called.
func NewRemote(parent context.Context) *Remote {
	ctx, cancel := context.WithCancel(parent)
	return &Remote{ctx: ctx, cancel: cancel, cached: map[int]int{}, arrived: make(chan struct{}, 1)}
}

// Start counts a request open and runs it on its own goroutine with the
// Remote's context. run must Push the request's last event (Done, or Err).
func (r *Remote) Start(run func(ctx context.Context)) {
	r.mu.Lock()
	r.open++
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		run(r.ctx)
	}()
}

// Aborted reports whether Close (or the parent context) ended the requests.
func (r *Remote) Aborted() bool { return r.ctx.Err() != nil }

// Push queues events for Run and wakes a waiting Wait.
func (r *Remote) Push(evs ...Token) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	r.ready = append(r.ready, evs...)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

// SetCached records the prompt tokens the server found cached for id.
func (r *Remote) SetCached(id, n int) {
	r.mu.Lock()
	r.cached[id] = n
	r.mu.Unlock()
}

// CachedTokens reports what SetCached recorded for id; 0 if nothing.
func (r *Remote) CachedTokens(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cached[id]
}

// Step hands back the events read so far without waiting.
func (r *Remote) Step() []Token { return r.Wait(0) }

// Busy reports whether a started request has not ended yet.
func (r *Remote) Busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open > 0
}

// Wait hands back the events read so far, first waiting up to d (forever
// when d < 0) for one to arrive.
func (r *Remote) Wait(d time.Duration) []Token {
	if out := r.take(); len(out) > 0 || d == 0 {
		return out
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-r.arrived:
	case <-timeout:
	}
	return r.take()
}

// take removes and returns the ready events.
func (r *Remote) take() []Token {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ready
	r.ready = nil
	for _, ev := range out {
		if ev.Done || ev.Err != nil {
			r.open--
		}
	}
	return out
}

// Close aborts the requests still open and waits for their goroutines.
func (r *Remote) Close() {
	r.cancel()
	r.wg.Wait()
}

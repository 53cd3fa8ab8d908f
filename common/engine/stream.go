package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"kvlab/common/kvcache"
)

// ErrStopped is the error Submit returns once the server has stopped.
var ErrStopped = errors.New("engine: server stopped")

// ErrQueueFull is the error Submit returns while Limits.MaxWaiting
// requests are already waiting for admission.
var ErrQueueFull = errors.New("engine: the waiting queue is full")

// Server runs an engine on its own goroutine and gives every request its
// own output Stream: the request's events in order, ending with its last.
// It is the shape a network front end needs; the benchmarks drive the
// engine step by step instead, to time arrivals exactly.
//
// Only the goroutine in Run touches the engine. Other goroutines talk to it
// through the mutex-guarded inbox (new requests, cancellations) and read a
// Snapshot the loop refreshes after every step.
//
// The loop never waits for a reader. It appends each event to its stream's
// buffer and moves on; a reader that falls more than Limits.MaxUnread
// events behind (a client that stopped reading its socket) has its request
// cancelled, and its blocks go back to the pool at the next step.
type Server struct {
	e       *Engine
	wake    chan struct{} // nudges the loop when work arrives
	context int           // the engine's context limit; fixed
	limits  Limits        // fixed once Run starts

	mu      sync.Mutex
	in      []Request            // submitted, not yet handed to the engine
	cancels []int                // request ids to cancel at the next turn
	calls   []call               // functions to run on the loop at the next turn
	outs    map[int]*Stream      // open streams by request id
	left    map[int]int          // samples still running per open stream
	errs    map[int]chan<- error // submitters waiting for validation
	snap    Snapshot             // state after the latest step; Waiting kept exact
	tooSlow int                  // requests cancelled because their reader fell behind
	stopped bool                 // Run has returned; Submit refuses
}

// Limits bound what one Server holds for its clients.
type Limits struct {
	// MaxUnread is how many events a stream may hold unread before the
	// loop cancels its request (DefaultMaxUnread if 0). An event is one
	// token of one sample, about 100 bytes buffered.
	MaxUnread int
	// MaxWaiting makes Submit refuse with ErrQueueFull while this many
	// sequences wait for admission, counting requests not yet seen by the
	// engine; 0 means no bound.
	MaxWaiting int
}

// DefaultMaxUnread is Limits.MaxUnread's default: a reader that is a few
// seconds of a busy engine's output behind.
const DefaultMaxUnread = 4096

// Stream is one request's output, from the serving loop to one reader:
// events in order, the last of each sample with Done set. The loop appends
// without waiting; Recv takes them out.
type Stream struct {
	ready chan struct{} // holds a token while buf is non-empty or the stream ended

	mu      sync.Mutex
	buf     []Output // delivered, not yet read
	ended   bool     // the last event is in buf
	tooSlow bool     // the loop cancelled the request: its reader fell behind
}

func newStream() *Stream { return &Stream{ready: make(chan struct{}, 1)} }

// Recv returns the stream's next event, waiting for one if need be. ok is
// false once the last event has been read; err is ctx's error if ctx ended
// first.
func (st *Stream) Recv(ctx context.Context) (o Output, ok bool, err error) {
	for {
		st.mu.Lock()
		if len(st.buf) > 0 {
			o = st.buf[0]
			st.buf[0] = Output{} // let the logits go
			st.buf = st.buf[1:]
			if len(st.buf) > 0 || st.ended {
				st.signal()
			}
			st.mu.Unlock()
			return o, true, nil
		}
		if st.ended {
			st.signal() // for a Recv after this one
			st.mu.Unlock()
			return Output{}, false, nil
		}
		st.mu.Unlock()
		select {
		case <-ctx.Done():
			return Output{}, false, ctx.Err()
		case <-st.ready:
		}
	}
}

// TooSlow reports whether the serving loop cancelled the request because
// more than Limits.MaxUnread of its events were waiting to be read.
func (st *Stream) TooSlow() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.tooSlow
}

// push appends o (and ends the stream after it when last). It reports
// true the first time the unread events pass budget before the stream's
// end, marking the stream too slow: its request must then be cancelled.
func (st *Stream) push(o Output, last bool, budget int) (overBudget bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.buf = append(st.buf, o)
	st.ended = st.ended || last
	st.signal()
	if len(st.buf) > budget && !st.ended && !st.tooSlow {
		st.tooSlow = true
		return true
	}
	return false
}

// signal wakes a waiting Recv; call it with st.mu held.
func (st *Stream) signal() {
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

// Snapshot is the engine's state after a step, for metrics and admission
// control in front ends. Reading it never waits for a step.
type Snapshot struct {
	Stats       Stats
	Waiting     int // sequences queued (new or preempted)
	Running     int // sequences admitted
	Inbox       int // requests submitted but not yet seen by the engine
	TotalBlocks int
	FreeBlocks  int // blocks on the allocator's free list
	CacheBlocks int // blocks the prefix cache references (0 without one)
	Evicted     int // blocks the prefix cache evicted so far
	Copies      int // copy-on-write block copies so far
	// TooSlow counts requests the loop cancelled because their reader
	// fell more than Limits.MaxUnread events behind.
	TooSlow int
	// Tiers are the cache tiers' counters, in order, and TierCounters
	// what the pool did with them (empty without tiers).
	Tiers        []kvcache.TierStats
	TierCounters kvcache.TierCounters
	// Tails is what the pool did with kept partial blocks (zero without
	// Config.TailBlocks).
	Tails kvcache.TailStats
}

// NewServer wraps e with the default Limits. Call Run to start serving.
func NewServer(e *Engine) *Server { return NewServerWith(e, Limits{}) }

// NewServerWith wraps e with the given limits.
func NewServerWith(e *Engine, l Limits) *Server {
	if l.MaxUnread <= 0 {
		l.MaxUnread = DefaultMaxUnread
	}
	s := &Server{e: e, context: e.ContextLimit(), limits: l, outs: make(map[int]*Stream), left: make(map[int]int), errs: make(map[int]chan<- error), wake: make(chan struct{}, 1)}
	s.snap = s.snapshot()
	return s
}

// Submit queues r and returns its stream, or the reason to reject it: the
// engine's, ErrQueueFull or ErrStopped. It blocks until the serving
// goroutine has validated r, so Run must be running.
func (s *Server) Submit(r Request) (*Stream, error) {
	st := newStream()
	verdict := make(chan error, 1)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, ErrStopped
	}
	if _, dup := s.outs[r.ID]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("engine: request %d: id %d is already in use", r.ID, r.ID)
	}
	// snap.Waiting is exact here (intake updates it as it hands requests
	// over), so the bound holds however many submit at once.
	if m := s.limits.MaxWaiting; m > 0 && s.snap.Waiting+len(s.in) >= m {
		s.mu.Unlock()
		return nil, ErrQueueFull
	}
	s.in = append(s.in, r)
	s.outs[r.ID] = st
	s.left[r.ID] = r.samples()
	s.errs[r.ID] = verdict
	s.mu.Unlock()
	s.nudge()
	if err := <-verdict; err != nil {
		return nil, err
	}
	return st, nil
}

// Cancel asks the loop to end request id (Engine.Cancel) before its next
// step. The request's stream then gets a last event with Reason
// "cancelled" for every unfinished sample and ends. Cancelling a
// finished or unknown id does nothing.
func (s *Server) Cancel(id int) {
	s.mu.Lock()
	s.cancels = append(s.cancels, id)
	s.mu.Unlock()
	s.nudge()
}

// call is a function Do runs on the serving goroutine, and where its
// result goes.
type call struct {
	fn   func(*Engine) error
	done chan<- error
}

// Do runs fn on the serving goroutine between two steps, with the engine to
// itself, and returns fn's error: the way another goroutine may touch the
// engine or its pool (a slot restore commits saved KV into the prefix
// cache while requests run). It returns ErrStopped, without running fn,
// once the loop has stopped. fn must not call the Server.
func (s *Server) Do(fn func(*Engine) error) error {
	done := make(chan error, 1)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return ErrStopped
	}
	s.calls = append(s.calls, call{fn, done})
	s.mu.Unlock()
	s.nudge()
	return <-done
}

// ContextLimit returns the engine's context limit in tokens.
func (s *Server) ContextLimit() int { return s.context }

// Snapshot returns the state after the latest step.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snap
	snap.Inbox = len(s.in)
	snap.TooSlow = s.tooSlow
	return snap
}

func (s *Server) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run serves until ctx is done. Then it cancels every request still in
// flight, delivers their last events, closes every stream, refuses new
// submissions and returns; the engine holds no sequence afterwards.
func (s *Server) Run(ctx context.Context) {
	defer s.drain()
	for {
		s.intake()
		if !s.e.Busy() {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.deliver(s.e.Step())
	}
}

// intake hands new requests to the engine and applies cancellations.
func (s *Server) intake() {
	s.mu.Lock()
	in, cancels, calls := s.in, s.cancels, s.calls
	s.in, s.cancels, s.calls = nil, nil, nil
	for _, r := range in {
		s.answer(r.ID, s.e.Submit(r))
	}
	s.snap.Waiting = s.e.Waiting() // the requests just handed over wait there now
	s.mu.Unlock()
	for _, id := range cancels {
		s.e.Cancel(id)
	}
	for _, c := range calls {
		c.done <- c.fn(s.e)
	}
	if len(calls) > 0 { // a call may have changed the pool: metrics see it now
		snap := s.snapshot()
		s.mu.Lock()
		s.snap = snap
		s.mu.Unlock()
	}
}

// answer gives the submitter of request id its verdict; a refused request
// has no stream. Call it with s.mu held.
func (s *Server) answer(id int, err error) {
	s.errs[id] <- err
	delete(s.errs, id)
	if err != nil {
		delete(s.outs, id)
		delete(s.left, id)
	}
}

// deliver appends each event to its stream, ends streams whose last
// sample finished, and cancels the request of a stream whose reader has
// fallen more than MaxUnread events behind. It never waits for a reader.
func (s *Server) deliver(outs []Output) {
	for _, o := range outs {
		s.mu.Lock()
		st := s.outs[o.ID]
		last := false
		if o.Done {
			s.left[o.ID]--
			if last = s.left[o.ID] == 0; last {
				delete(s.outs, o.ID)
				delete(s.left, o.ID)
			}
		}
		s.mu.Unlock()
		if st == nil {
			continue
		}
		if st.push(o, last, s.limits.MaxUnread) && s.e.Cancel(o.ID) {
			s.mu.Lock()
			s.tooSlow++
			s.mu.Unlock()
		}
	}
	snap := s.snapshot()
	s.mu.Lock()
	s.snap = snap
	s.mu.Unlock()
}

// drain ends the serving loop: pending submissions are refused, requests in
// flight are cancelled and their streams closed.
func (s *Server) drain() {
	s.mu.Lock()
	s.stopped = true
	for _, r := range s.in {
		s.answer(r.ID, ErrStopped)
	}
	s.in = nil
	for _, c := range s.calls {
		c.done <- ErrStopped
	}
	s.calls = nil
	ids := make([]int, 0, len(s.outs))
	for id := range s.outs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.e.Cancel(id)
	}
	// Cancelled requests report their last events at the next step, which
	// computes nothing: every sequence is gone.
	s.deliver(s.e.Step())
}

func (s *Server) snapshot() Snapshot {
	p := s.e.Pool()
	snap := Snapshot{
		Stats:       s.e.Stats(),
		Waiting:     s.e.Waiting(),
		Running:     s.e.Running(),
		TotalBlocks: p.Allocator().Total(),
		FreeBlocks:  p.Allocator().NumFree(),
		Copies:      p.Copies(),
		Tails:       p.TailStats(),
	}
	if c := p.Cache(); c != nil {
		cs := c.Stats()
		snap.CacheBlocks, snap.Evicted = cs.Blocks, cs.Evicted
	}
	for _, t := range p.Tiers() {
		snap.Tiers = append(snap.Tiers, t.Stats())
	}
	snap.TierCounters = p.TierCounters()
	return snap
}

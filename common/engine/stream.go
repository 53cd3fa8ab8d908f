package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrStopped is the error Submit returns once the server has stopped.
var ErrStopped = errors.New("engine: server stopped")

// Server runs an engine on its own goroutine and gives every request its
// own output stream: a channel that carries the request's events in order
// and is closed after the last one. It is the shape a network front end
// needs; the benchmarks drive the engine step by step instead, to time
// arrivals exactly.
//
// Only the goroutine in Run touches the engine. Other goroutines talk to it
// through the mutex-guarded inbox (new requests, cancellations) and read a
// Snapshot the loop refreshes after every step.
type Server struct {
	e       *Engine
	wake    chan struct{} // nudges the loop when work arrives
	context int           // the engine's context limit; fixed

	mu      sync.Mutex
	in      []Request            // submitted, not yet handed to the engine
	cancels []int                // request ids to cancel at the next turn
	outs    map[int]chan Output  // open streams by request id
	left    map[int]int          // samples still running per open stream
	errs    map[int]chan<- error // submitters waiting for validation
	snap    Snapshot             // state after the latest step
	stopped bool                 // Run has returned; Submit refuses
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
}

// NewServer wraps e. Call Run to start serving.
func NewServer(e *Engine) *Server {
	s := &Server{e: e, context: e.ContextLimit(), outs: make(map[int]chan Output), left: make(map[int]int), errs: make(map[int]chan<- error), wake: make(chan struct{}, 1)}
	s.snap = s.snapshot()
	return s
}

// Submit queues r and returns its stream, or the engine's reason to reject
// it. It blocks until the serving goroutine has validated r, so Run must be
// running. After Run has returned it fails with ErrStopped.
func (s *Server) Submit(r Request) (<-chan Output, error) {
	// Room for the whole output, so a slow reader rarely stalls the loop.
	ch := make(chan Output, min(max(r.MaxTokens, 0)*r.samples(), 4096)+1)
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
	s.in = append(s.in, r)
	s.outs[r.ID] = ch
	s.left[r.ID] = r.samples()
	s.errs[r.ID] = verdict
	s.mu.Unlock()
	s.nudge()
	if err := <-verdict; err != nil {
		return nil, err
	}
	return ch, nil
}

// Cancel asks the loop to end request id (Engine.Cancel) before its next
// step. The request's stream then gets a last event with Reason
// "cancelled" for every unfinished sample and is closed. Cancelling a
// finished or unknown id does nothing.
func (s *Server) Cancel(id int) {
	s.mu.Lock()
	s.cancels = append(s.cancels, id)
	s.mu.Unlock()
	s.nudge()
}

// ContextLimit returns the engine's context limit in tokens.
func (s *Server) ContextLimit() int { return s.context }

// Snapshot returns the state after the latest step.
func (s *Server) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snap
	snap.Inbox = len(s.in)
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
	in, cancels := s.in, s.cancels
	s.in, s.cancels = nil, nil
	for _, r := range in {
		s.answer(r.ID, s.e.Submit(r))
	}
	s.mu.Unlock()
	for _, id := range cancels {
		s.e.Cancel(id)
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

// deliver sends each event to its stream and closes streams that ended.
func (s *Server) deliver(outs []Output) {
	for _, o := range outs {
		s.mu.Lock()
		ch := s.outs[o.ID]
		last := false
		if o.Done {
			s.left[o.ID]--
			if last = s.left[o.ID] == 0; last {
				delete(s.outs, o.ID)
				delete(s.left, o.ID)
			}
		}
		s.mu.Unlock()
		if ch == nil {
			continue
		}
		ch <- o
		if last {
			close(ch)
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
	}
	if c := p.Cache(); c != nil {
		cs := c.Stats()
		snap.CacheBlocks, snap.Evicted = cs.Blocks, cs.Evicted
	}
	return snap
}

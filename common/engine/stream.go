package engine

import (
	"context"
	"fmt"
	"sync"
)

// Server runs an engine on its own goroutine and gives every request its
// own output stream: a channel that carries the request's events in order
// and is closed after the last one. It is the shape a network front end
// needs; the benchmarks drive the engine step by step instead, to time
// arrivals exactly.
type Server struct {
	e    *Engine
	mu   sync.Mutex
	in   []Request            // submitted, not yet handed to the engine
	outs map[int]chan Output  // open streams by request id
	left map[int]int          // samples still running per open stream
	errs map[int]chan<- error // submitters waiting for validation
	wake chan struct{}        // nudges the loop when work arrives
}

// NewServer wraps e. Call Run to start serving.
func NewServer(e *Engine) *Server {
	return &Server{e: e, outs: make(map[int]chan Output), left: make(map[int]int), errs: make(map[int]chan<- error), wake: make(chan struct{}, 1)}
}

// Submit queues r and returns its stream, or the engine's reason to reject
// it. It blocks until the serving goroutine has validated r, so Run must be
// running.
func (s *Server) Submit(r Request) (<-chan Output, error) {
	// Room for the whole output, so a slow reader rarely stalls the loop.
	ch := make(chan Output, min(max(r.MaxTokens, 0)*r.samples(), 4096)+1)
	verdict := make(chan error, 1)
	s.mu.Lock()
	if _, dup := s.outs[r.ID]; dup {
		s.mu.Unlock()
		return nil, fmt.Errorf("engine: request %d: id %d is already in use", r.ID, r.ID)
	}
	s.in = append(s.in, r)
	s.outs[r.ID] = ch
	s.left[r.ID] = r.samples()
	s.errs[r.ID] = verdict
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if err := <-verdict; err != nil {
		return nil, err
	}
	return ch, nil
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) {
	for {
		s.mu.Lock()
		in := s.in
		s.in = nil
		for _, r := range in {
			err := s.e.Submit(r)
			s.errs[r.ID] <- err
			delete(s.errs, r.ID)
			if err != nil {
				delete(s.outs, r.ID)
				delete(s.left, r.ID)
			}
		}
		s.mu.Unlock()

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
		for _, o := range s.e.Step() {
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
			ch <- o
			if last {
				close(ch)
			}
		}
	}
}

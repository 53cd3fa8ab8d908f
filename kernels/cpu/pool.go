package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A decode step calls MatMulT (and attention) a few dozen times, each call
// only microseconds long, so starting goroutines per call, or waking parked
// ones through the scheduler, would cost as much as the work. The backend
// therefore keeps its helper goroutines alive between calls: after a call
// each helper spins for a short while (spinIters checks, a few tens of
// microseconds) waiting for the next one, and only then parks on a channel.

// spinIters is how many times a helper or a waiting caller polls before it
// parks.
const spinIters = 1 << 15

// event is a one-shot wake-up that its single waiter first polls and then
// blocks on. Each set is matched by exactly one wait.
type event struct {
	state atomic.Int32 // evIdle, evSet or evParked
	ch    chan struct{}
}

const (
	evIdle = iota
	evSet
	evParked
)

func newEvent() *event { return &event{ch: make(chan struct{}, 1)} }

func (e *event) set() {
	if e.state.Swap(evSet) == evParked {
		e.ch <- struct{}{}
	}
}

// wait returns once set has been called, and resets the event; it returns
// false instead if quit is closed while it is parked.
func (e *event) wait(quit <-chan struct{}) bool {
	for i := range spinIters {
		if e.state.Load() == evSet {
			e.state.Store(evIdle)
			return true
		}
		if i%256 == 255 {
			runtime.Gosched() // let the goroutine we wait for run if it shares our P
		}
	}
	if e.state.CompareAndSwap(evIdle, evParked) {
		select {
		case <-e.ch:
		case <-quit:
			return false
		}
	}
	e.state.Store(evIdle)
	return true
}

// workerPool runs parallel calls on helpers-many long-lived goroutines plus
// the caller. One call uses it at a time; see Backend.parallel.
type workerPool struct {
	mu    sync.Mutex
	start []*event // per helper: a call is ready
	done  *event   // the last helper has finished the call
	quit  chan struct{}

	// The call in progress, written before the helpers' start events are
	// set and read after.
	body    func(worker, i int)
	n       int
	next    atomic.Int64
	pending atomic.Int32 // helpers still running the call
}

func newWorkerPool(helpers int) *workerPool {
	p := &workerPool{done: newEvent(), quit: make(chan struct{}), start: make([]*event, helpers)}
	for h := range p.start {
		p.start[h] = newEvent()
	}
	for h := range p.start {
		go p.helper(h + 1)
	}
	return p
}

// close stops the helpers once they are idle.
func (p *workerPool) close() { close(p.quit) }

func (p *workerPool) helper(worker int) {
	for p.start[worker-1].wait(p.quit) {
		p.run(worker)
		if p.pending.Add(-1) == 0 {
			p.done.set()
		}
	}
}

func (p *workerPool) run(worker int) {
	for {
		i := int(p.next.Add(1) - 1)
		if i >= p.n {
			return
		}
		p.body(worker, i)
	}
}

// call runs body(worker, i) for every i in [0, n) on the caller and the
// first w-1 helpers (w-1 ≤ len(p.start)). It reports false, doing nothing,
// if another call holds the pool.
func (p *workerPool) call(w, n int, body func(worker, i int)) bool {
	if !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	p.body, p.n = body, n
	p.next.Store(0)
	p.pending.Store(int32(w - 1))
	for h := range w - 1 {
		p.start[h].set()
	}
	p.run(0)
	p.done.wait(nil)
	p.body = nil // do not keep the caller's closure alive
	return true
}

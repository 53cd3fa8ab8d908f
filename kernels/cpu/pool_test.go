package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelSharedBackend runs calls from several goroutines on one
// backend at once: one gets the helpers, the others start goroutines of
// their own, and every index still runs exactly once per call, on one of
// the first min(workers, n) workers (attention sizes its per-worker
// scratch so).
func TestParallelSharedBackend(t *testing.T) {
	b := NewWithWorkers(3)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 200 {
				n := 1 + (g*7+round)%50
				hits := make([]atomic.Int32, n)
				b.parallel(n, func(worker, i int) {
					if worker < 0 || worker >= min(3, n) {
						t.Errorf("worker %d out of range for %d jobs", worker, n)
					}
					hits[i].Add(1)
				})
				for i := range hits {
					if h := hits[i].Load(); h != 1 {
						t.Errorf("index %d of %d ran %d times", i, n, h)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestPoolHelpersExit checks that a backend's helpers exit once the backend
// is unreachable, so that making many backends does not leak goroutines.
func TestPoolHelpersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 10 {
		b := NewWithWorkers(4)
		b.parallel(8, func(int, int) {})
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines before, %d after the backends were dropped", before, n)
	}
}

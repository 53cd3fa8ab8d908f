package trace_test

import (
	"bytes"
	"strings"
	"testing"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/trace"
	"kvlab/kernels/cpu"
)

// discard is a tracer that drops everything: what a trace costs the engine
// without the cost of printing it.
type discard struct{}

func (discard) PoolEvent(kvcache.TraceEvent) {}
func (discard) Sequence(int, int, int)       {}
func (discard) Plan(int, []engine.TraceWork) {}
func (discard) StepDone(*kvcache.Pool)       {}

// poolAllocs returns the allocations of one round of pool operations that
// reach every hook but the cache's: open, grow, fork, a copy-on-write
// write, and two releases.
func poolAllocs(t *testing.T, tr kvcache.Tracer) float64 {
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 4, Blocks: 8, BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetTracer(tr)
	prompt := []int32{1, 2, 3, 4, 5, 6}
	return testing.AllocsPerRun(50, func() {
		if _, err := p.Open(1, "", prompt); err != nil {
			t.Fatal(err)
		}
		if err := p.Grow(1, len(prompt)); err != nil {
			t.Fatal(err)
		}
		if err := p.Fork(1, 2); err != nil {
			t.Fatal(err)
		}
		if err := p.PrepareWrite(2, len(prompt), 1); err != nil { // copies the shared last block
			t.Fatal(err)
		}
		p.Release(2)
		p.Release(1)
	})
}

// TestTraceOffCostsNothing: with no tracer the pool builds no events. A
// discarding tracer still costs the copy event's fresh slice of two block
// ids; the untraced pool must not pay it, nor anything else.
func TestTraceOffCostsNothing(t *testing.T) {
	off := poolAllocs(t, nil)
	on := poolAllocs(t, discard{})
	t.Logf("allocations per round: trace off %.0f, discarding tracer %.0f", off, on)
	if off >= on {
		t.Errorf("trace off allocates %.0f per round, a discarding tracer %.0f: the untraced pool builds trace events", off, on)
	}
}

// TestWriterOneLineEach: a step is its plan, then one line per pool event
// in the order they happened; a step with neither prints nothing.
func TestWriterOneLineEach(t *testing.T) {
	var buf bytes.Buffer
	w := trace.New(&buf, false)
	w.Sequence(1, 7, 0)
	w.Sequence(2, 7, 1)
	w.Plan(3, []engine.TraceWork{{Seq: 1, From: 11, N: 1, Decode: true}, {Seq: 2, From: 0, N: 8}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceMatch, Seq: 2, Tokens: 11, Matched: 8, Blocks: []int32{0, 1}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceGrow, Seq: 2, Blocks: []int32{5}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceEvict, Want: 1, Blocks: []int32{3}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceCopy, Seq: 1, Page: 2, Blocks: []int32{5, 7}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceCommit, Seq: 2, Tokens: 8, Cached: [2]int{2, 3}, Lent: [2]int{2, 3}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceFork, Seq: 1, Other: 2, Blocks: []int32{0, 1, 5}})
	w.PoolEvent(kvcache.TraceEvent{Op: kvcache.TraceRelease, Seq: 1, Blocks: []int32{4}})
	w.StepDone(nil)
	w.Plan(0, nil)
	w.StepDone(nil)
	want := strings.Join([]string{
		"step 3: r7 decode @11, r7.1 prefill [0,8)",
		"  match   r7.1: 8 of 11 prompt tokens cached, lent [0 1]",
		"  alloc   r7.1: [5]",
		"  evict   1 short: freed [3]",
		"  cow     r7 page 2: block 5 is shared, copied to 7",
		"  commit  r7.1: 8 tokens; cache 2 → 3 blocks; adopted 1 page (lent 2 → 3)",
		"  fork    r7 → r7.1: shares pages [0 1 5]",
		"  release r7: freed [4]",
		"",
	}, "\n")
	if got := buf.String(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

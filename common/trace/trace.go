// Package trace prints what a serving engine does, one compact line per
// event: each step's plan (which sequences, which prefill spans and
// decodes), then every prefix-cache match, allocation, commit, eviction,
// copy-on-write and release the step caused, and optionally the pool's
// state after the step (kvcache.Pool.Dump: allocator counts, page tables,
// and the prefix cache's own drawing when it is a kvcache.Dumper).
//
// A Writer is an engine.Tracer: set it as engine.Config.Trace. Sequences
// are named by request, r3, and a forked sample by request and sample,
// r3.1.
package trace

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
)

// Writer writes a text trace to an io.Writer.
type Writer struct {
	w     io.Writer
	dump  bool
	names map[int]string
	plan  string
	lines []string
	err   error

	record bool    // keep every step for Figure (Record)
	frames []frame // the steps kept
}

var _ engine.Tracer = (*Writer)(nil)

// New returns a Writer printing to w; with dump it also draws the pool and
// the cache after every step.
func New(w io.Writer, dump bool) *Writer {
	return &Writer{w: w, dump: dump, names: map[int]string{}}
}

// Err returns the first error writing the trace.
func (t *Writer) Err() error { return t.err }

// Sequence implements engine.Tracer.
func (t *Writer) Sequence(seq, request, sample int) {
	if sample == 0 {
		t.names[seq] = fmt.Sprintf("r%d", request)
	} else {
		t.names[seq] = fmt.Sprintf("r%d.%d", request, sample)
	}
}

// Name returns the name of pool sequence seq.
func (t *Writer) Name(seq int) string {
	if n, ok := t.names[seq]; ok {
		return n
	}
	return fmt.Sprintf("s%d", seq)
}

// Plan implements engine.Tracer.
func (t *Writer) Plan(step int, work []engine.TraceWork) {
	if len(work) == 0 {
		t.plan = ""
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "step %d:", step)
	for i, w := range work {
		if i > 0 {
			b.WriteByte(',')
		}
		if w.Decode {
			fmt.Fprintf(&b, " %s decode @%d", t.Name(w.Seq), w.From)
		} else {
			fmt.Fprintf(&b, " %s prefill [%d,%d)", t.Name(w.Seq), w.From, w.From+w.N)
		}
	}
	t.plan = b.String()
}

// PoolEvent implements kvcache.Tracer.
func (t *Writer) PoolEvent(ev kvcache.TraceEvent) {
	var s string
	name := t.Name(ev.Seq)
	switch ev.Op {
	case kvcache.TraceMatch:
		s = fmt.Sprintf("match   %s: %d of %d prompt tokens cached", name, ev.Matched, ev.Tokens)
		if len(ev.Blocks) > 0 {
			s += fmt.Sprintf(", lent %s", list(ev.Blocks))
		}
	case kvcache.TraceGrow:
		s = fmt.Sprintf("alloc   %s: %s", name, list(ev.Blocks))
	case kvcache.TraceCommit:
		s = fmt.Sprintf("commit  %s: %d tokens; cache %d → %d blocks", name, ev.Tokens, ev.Cached[0], ev.Cached[1])
		if ev.Lent[1] != ev.Lent[0] {
			s += fmt.Sprintf("; adopted %s (lent %d → %d)", plural(ev.Lent[1]-ev.Lent[0], "page"), ev.Lent[0], ev.Lent[1])
		}
	case kvcache.TraceEvict:
		s = fmt.Sprintf("evict   %d short: freed %s", ev.Want, list(ev.Blocks))
	case kvcache.TraceCopy:
		s = fmt.Sprintf("cow     %s page %d: block %d is shared, copied to %d", name, ev.Page, ev.Blocks[0], ev.Blocks[1])
	case kvcache.TraceFork:
		s = fmt.Sprintf("fork    %s → %s: shares pages %s", name, t.Name(ev.Other), list(ev.Blocks))
	case kvcache.TraceRelease:
		s = fmt.Sprintf("release %s: freed %s", name, list(ev.Blocks))
	case kvcache.TraceTailKeep:
		s = fmt.Sprintf("tail    %s: kept block %d (%s of a partial block)", name, ev.Blocks[0], plural(ev.Tokens, "token"))
	case kvcache.TraceTailHit:
		s = fmt.Sprintf("tail    %s: %s of kept block %d, copied to %d", name, plural(ev.Tokens, "token"), ev.Blocks[0], ev.Blocks[1])
	default:
		s = fmt.Sprintf("op %d  %s", ev.Op, name)
	}
	t.lines = append(t.lines, s)
}

// StepDone implements engine.Tracer: it writes the step's plan, its
// events, and the pool's state when dumping. A step that did nothing
// writes nothing.
func (t *Writer) StepDone(pool *kvcache.Pool) {
	if t.plan == "" && len(t.lines) == 0 {
		return
	}
	var b bytes.Buffer
	if t.plan != "" {
		b.WriteString(t.plan + "\n")
	} else {
		b.WriteString("between steps:\n")
	}
	for _, l := range t.lines {
		b.WriteString("  " + l + "\n")
	}
	if t.dump {
		var d bytes.Buffer
		pool.Dump(&d, t.Name)
		for _, l := range strings.SplitAfter(strings.TrimRight(d.String(), "\n"), "\n") {
			b.WriteString("  | " + strings.TrimRight(l, "\n") + "\n")
		}
	}
	if t.record {
		t.keep(pool)
	}
	t.plan, t.lines = "", t.lines[:0]
	if _, err := t.w.Write(b.Bytes()); err != nil && t.err == nil {
		t.err = err
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// list prints a block list, the middle of a long one elided: a 1024-token
// prompt lends 64 blocks of 16.
func list(bs []int32) string {
	if len(bs) <= 12 {
		return fmt.Sprint(bs)
	}
	return fmt.Sprintf("[%d %d %d … %d %d] (%d blocks)", bs[0], bs[1], bs[2], bs[len(bs)-2], bs[len(bs)-1], len(bs))
}

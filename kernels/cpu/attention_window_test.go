package cpu_test

import (
	"fmt"
	"testing"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// windowShape is shapeOf with a sliding window and a soft cap.
func windowShape(heads, kvHeads, hd, bs, window int, softCap float32) kernels.AttnShape {
	sh := shapeOf(heads, kvHeads, hd, bs)
	sh.Window, sh.SoftCap = window, softCap
	return sh
}

// TestAttendWindowMatchesDense checks windowed attention against the dense
// reference with windows smaller than, equal to and larger than the block
// size and the chunk (qlen), on contexts that run well past the window: a
// window off by one position agrees with the reference only while the
// context is shorter than the window.
func TestAttendWindowMatchesDense(t *testing.T) {
	// Chunks of 1 (decode), 3, 8 and 20 query rows, contexts up to 70.
	specs := []seqSpec{{1, 1}, {1, 9}, {3, 12}, {8, 8}, {8, 30}, {20, 45}, {1, 70}, {5, 5}}
	for _, bs := range []int{1, 4, 16} {
		for _, w := range []int{1, 2, 3, 4, 7, 8, 16, 20, 33, 100} {
			for _, softCap := range []float32{0, 1.5} {
				name := fmt.Sprintf("bs=%d/window=%d/softcap=%v", bs, w, softCap)
				t.Run(name, func(t *testing.T) {
					be := cpu.New()
					sh := windowShape(4, 2, 8, bs, w, softCap)
					f := newAttnFixture(t, be, newRand(uint64(bs*1000+w)), sh, specs)
					// Sharper scores so that a wrongly included key moves the
					// output well beyond the tolerance.
					sh.Scale = 2
					out := be.New(f.q.Rows(), f.q.Cols())
					be.Attend(out, f.q, f.kc, f.vc, f.seqs, sh)
					want := denseAttention(cpu.Data(f.q), f.keys, f.vals, f.seqs, sh)
					requireClose(t, cpu.Data(out), want, 1e-5, "out")
				})
			}
		}
	}
}

// TestAttendWindowBoundary pins the boundary exactly: a query at position p
// with window W sees positions p-W+1..p, so its output is bit for bit that
// of unwindowed attention over a sequence made of just those W keys. (The
// context is shorter than one 64-key block of Attend, so both calls visit
// those keys in a single block.)
func TestAttendWindowBoundary(t *testing.T) {
	be := cpu.New()
	const ctx = 40
	for _, w := range []int{1, 5, 8, 39, 40} {
		sh := windowShape(2, 1, 8, 4, w, 0)
		f := newAttnFixture(t, be, newRand(uint64(w)), sh, []seqSpec{{ctx, ctx}})
		out := be.New(ctx, f.q.Cols())
		be.Attend(out, f.q, f.kc, f.vc, f.seqs, sh)

		kvCols := sh.NumKVHeads * sh.HeadDim
		qCols := f.q.Cols()
		for _, p := range []int{0, w - 1, w, w + 1, ctx - 1} {
			if p < 0 || p >= ctx {
				continue
			}
			first := max(0, p-w+1)
			n := p - first + 1
			// The window's keys as a fresh sequence starting at position 0.
			g := &attnFixture{sh: windowShape(2, 1, 8, 4, 0, 0)}
			g.keys = [][]float32{f.keys[0][first*kvCols : (p+1)*kvCols]}
			g.vals = [][]float32{f.vals[0][first*kvCols : (p+1)*kvCols]}
			g.q = be.FromHost(1, qCols, cpu.Data(f.q)[p*qCols:(p+1)*qCols])
			g.place(t, be, newRand(uint64(100+p)), []seqSpec{{1, n}})
			ref := be.New(1, qCols)
			be.Attend(ref, g.q, g.kc, g.vc, g.seqs, g.sh)
			requireBitEqual(t, cpu.Data(out)[p*qCols:(p+1)*qCols], cpu.Data(ref), fmt.Sprintf("window %d, position %d", w, p))
		}
	}
}

// TestAttendWindowBatchInvariant runs the batch-invariance checks (alone,
// reordered, chunk as decodes, worker counts, block layouts) with a window
// shorter than most contexts, and checks that AttendLocal applies the same
// window bit for bit.
func TestAttendWindowBatchInvariant(t *testing.T) {
	for _, w := range []int{3, 16} {
		t.Run(fmt.Sprintf("window=%d", w), func(t *testing.T) {
			testAttendBatchInvariant(t, windowShape(4, 2, 16, 4, w, 0))
		})
	}
	be := cpu.New()
	for _, bs := range []int{1, 4} {
		for _, w := range []int{1, 4, 6, 50} {
			specs := []seqSpec{{1, 1}, {9, 9}, {33, 33}, {4, 4}}
			f := newAttnFixture(t, be, newRand(uint64(bs+w)), windowShape(6, 3, 7, bs, w, 2), specs)
			k, v := stepKV(be, f)
			paged, local := be.New(f.q.Rows(), f.q.Cols()), be.New(f.q.Rows(), f.q.Cols())
			be.Attend(paged, f.q, f.kc, f.vc, f.seqs, f.sh)
			be.AttendLocal(local, f.q, k, v, f.seqs, f.sh)
			requireBitEqual(t, cpu.Data(local), cpu.Data(paged), fmt.Sprintf("bs=%d window=%d: AttendLocal vs Attend", bs, w))
		}
	}
}

package cpu_test

import (
	"fmt"
	"slices"
	"testing"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestAttendBlocksChunkInvariant checks the blocked (online-softmax)
// attention on prompts that span several key blocks: against the float64
// dense reference, and, for every chunk size from 1 to 64, prefilled chunk
// by chunk through a page table whose pages before kernels.FirstPage are
// holes (-1), bit for bit equal to the whole prompt in one call. Shapes
// cover grouped-query heads, head widths that take the wide and the tail
// kernels, windows shorter and longer than a block, and the soft cap.
// Chunks of one row take attendRow's path and longer ones attendRows's
// (several rows per block; the six-row kernels for full groups), so this
// also holds the two paths to the same bits; pages of one row make
// scoresRows fall back to dotsRows8.
func TestAttendBlocksChunkInvariant(t *testing.T) {
	const ctx = 150 // three key blocks, the last one partial
	for _, hd := range []int{48, 12, 64, 80} {
		for _, bs := range []int{1, 16, 64} {
			for _, w := range []int{0, 5, 70} {
				for _, softCap := range []float32{0, 1.5} {
					name := fmt.Sprintf("hd=%d/bs=%d/window=%d/softcap=%v", hd, bs, w, softCap)
					t.Run(name, func(t *testing.T) {
						testAttendChunks(t, windowShape(4, 2, hd, bs, w, softCap), ctx, uint64(hd*1000+bs*10+w))
					})
				}
			}
		}
	}
}

func testAttendChunks(t *testing.T, sh kernels.AttnShape, ctx int, seed uint64) {
	be := cpu.New()
	f := newAttnFixture(t, be, newRand(seed), sh, []seqSpec{{ctx, ctx}})
	qCols := f.q.Cols()
	whole := be.New(ctx, qCols)
	be.Attend(whole, f.q, f.kc, f.vc, f.seqs, sh)
	requireClose(t, cpu.Data(whole), denseAttention(cpu.Data(f.q), f.keys, f.vals, f.seqs, sh), 1e-5, "whole prompt")

	qs := cpu.Data(f.q)
	for chunk := 1; chunk <= 64; chunk++ {
		for start := 0; start < ctx; start += chunk {
			n := min(chunk, ctx-start)
			seq := kernels.AttnSeq{QStart: 0, QLen: n, CtxLen: start + n, Pages: slices.Clone(f.seqs[0].Pages)}
			for p := range kernels.FirstPage(seq, sh) {
				seq.Pages[p] = -1
			}
			q := be.FromHost(n, qCols, qs[start*qCols:(start+n)*qCols])
			out := be.New(n, qCols)
			be.Attend(out, q, f.kc, f.vc, []kernels.AttnSeq{seq}, sh)
			want := cpu.Data(whole)[start*qCols : (start+n)*qCols]
			requireBitEqual(t, cpu.Data(out), want, fmt.Sprintf("chunk %d at %d", chunk, start))
		}
	}
}

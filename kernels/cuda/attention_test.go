//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"kvlab/kernels"
)

// attnTol is the attention tolerance against the CPU backend. Outputs are
// convex combinations of values in [-1, 1); the GPU sums scores, weights
// and partial results in other orders and with expf, which moves results by
// around 1e-7.
const attnTol = 1e-5

// seqSpec is one sequence of an attention test: qlen query rows, the last at
// position ctx-1. qlen < ctx is a prefill chunk (or decode step) after a
// cached prefix.
type seqSpec struct{ qlen, ctx int }

// attnFixture is a paged KV cache on both backends, every sequence's
// blocks scattered over a shuffled pool that also holds unused random
// blocks, so that reading a wrong slot changes the answer.
type attnFixture struct {
	sh          kernels.AttnShape
	seqs        []kernels.AttnSeq
	q, kc, vc   *pair
	nq          int
	kvRows, kvC int
}

func newAttnFixture(be *Backend, rng *rand.Rand, sh kernels.AttnShape, specs []seqSpec) *attnFixture {
	bs, kvCols := sh.BlockSize, sh.NumKVHeads*sh.HeadDim
	total := 3 // spare blocks
	for _, s := range specs {
		total += (s.ctx + bs - 1) / bs
	}
	f := &attnFixture{sh: sh, kvRows: total * bs, kvC: kvCols}
	perm := rng.Perm(total)
	next := 0
	for _, s := range specs {
		pages := make([]int32, (s.ctx+bs-1)/bs)
		for i := range pages {
			pages[i] = int32(perm[next])
			next++
		}
		f.seqs = append(f.seqs, kernels.AttnSeq{QStart: f.nq, QLen: s.qlen, CtxLen: s.ctx, Pages: pages})
		f.nq += s.qlen
	}
	f.kc = randPair(be, rng, f.kvRows, kvCols)
	f.vc = randPair(be, rng, f.kvRows, kvCols)
	f.q = randPair(be, rng, f.nq, sh.NumHeads*sh.HeadDim)
	return f
}

func (f *attnFixture) free(be *Backend) {
	for _, p := range []*pair{f.q, f.kc, f.vc} {
		p.free(be)
	}
}

func attnShape(heads, kvHeads, hd, bs int) kernels.AttnShape {
	return kernels.AttnShape{
		NumHeads: heads, NumKVHeads: kvHeads, HeadDim: hd, BlockSize: bs,
		Scale: float32(1 / math.Sqrt(float64(hd))),
	}
}

// mixed is a batch of decode steps and prefill chunks with ragged lengths,
// cached prefixes of every alignment, a whole-prompt prefill, and a
// sequence with no query rows this step.
var mixed = []seqSpec{{1, 1}, {1, 37}, {5, 5}, {9, 40}, {33, 33}, {0, 6}, {1, 100}, {17, 70}, {2, 2}, {1, 16}}

func TestAttendMatchesCPU(t *testing.T) {
	be := needGPU(t)
	cases := []struct {
		heads, kvHeads, hd int
		specs              []seqSpec
	}{
		{4, 4, 8, mixed},    // multi-head attention: group 1
		{8, 4, 7, mixed},    // odd head dim: the kernel's scalar path
		{8, 2, 64, mixed},   // group 4, Llama-3.2-1B's head dim
		{32, 8, 64, mixed},  // Llama-3.2-1B's heads
		{16, 2, 128, mixed}, // group 8, one query fills a work item exactly
		{16, 1, 32, mixed},  // group 16: a query's heads span two work items
		{4, 2, 256, mixed},  // Gemma-3's head dim, the kernel's largest
		{8, 2, 64, []seqSpec{{1, 700}, {1, 1}, {1, 129}}}, // long decode contexts: many key tiles per warp
		{8, 8, 64, []seqSpec{{100, 100}, {40, 300}}},      // long prefill chunks: several items and key tiles
	}
	for _, c := range cases {
		for _, bs := range []int{1, 2, 16} {
			name := fmt.Sprintf("h%d-kv%d-hd%d-bs%d-seqs%d", c.heads, c.kvHeads, c.hd, bs, len(c.specs))
			t.Run(name, func(t *testing.T) {
				f := newAttnFixture(be, newRand(uint64(bs*1000+c.hd)), attnShape(c.heads, c.kvHeads, c.hd, bs), c.specs)
				defer f.free(be)
				out := newPair(be, f.nq, c.heads*c.hd, make([]float32, f.nq*c.heads*c.hd))
				defer out.free(be)
				be.Attend(out.g, f.q.g, f.kc.g, f.vc.g, f.seqs, f.sh)
				ref.Attend(out.c, f.q.c, f.kc.c, f.vc.c, f.seqs, f.sh)
				requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "Attend")
			})
		}
	}
}

// TestAttendDecodeAfterWrite runs the sequence of calls a decode step makes:
// write the new token's KV (one row skipped, as a fully cached prompt does),
// then attend, so that the write and the read agree on slot arithmetic.
func TestAttendDecodeAfterWrite(t *testing.T) {
	be := needGPU(t)
	rng := newRand(21)
	sh := attnShape(8, 2, 64, 16)
	f := newAttnFixture(be, rng, sh, []seqSpec{{1, 20}, {1, 33}, {1, 16}})
	defer f.free(be)
	slots := make([]int32, len(f.seqs))
	for i, s := range f.seqs {
		p := s.CtxLen - 1
		slots[i] = s.Pages[p/sh.BlockSize]*int32(sh.BlockSize) + int32(p%sh.BlockSize)
	}
	slots[1] = -1
	k, v := randPair(be, rng, len(slots), f.kvC), randPair(be, rng, len(slots), f.kvC)
	be.WriteKV(f.kc.g, f.vc.g, k.g, v.g, slots)
	ref.WriteKV(f.kc.c, f.vc.c, k.c, v.c, slots)
	out := newPair(be, f.nq, 8*64, make([]float32, f.nq*8*64))
	be.Attend(out.g, f.q.g, f.kc.g, f.vc.g, f.seqs, sh)
	ref.Attend(out.c, f.q.c, f.kc.c, f.vc.c, f.seqs, sh)
	requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "Attend after WriteKV")
	for _, p := range []*pair{k, v, out} {
		p.free(be)
	}
}

func TestAttendLocal(t *testing.T) {
	be := needGPU(t)
	for _, c := range []struct{ heads, kvHeads, hd int }{{6, 3, 7}, {8, 2, 64}, {16, 1, 32}, {4, 4, 128}} {
		for _, specs := range [][]seqSpec{
			{{1, 1}, {9, 9}, {33, 33}, {4, 4}, {0, 0}}, // whole prompts
			{{4, 10}, {1, 3}, {6, 6}},                  // CtxLen > QLen: still only the chunk's own keys
		} {
			t.Run(fmt.Sprintf("h%d-kv%d-hd%d-seqs%d", c.heads, c.kvHeads, c.hd, len(specs)), func(t *testing.T) {
				rng := newRand(uint64(c.hd))
				sh := attnShape(c.heads, c.kvHeads, c.hd, 4)
				f := newAttnFixture(be, rng, sh, specs)
				defer f.free(be)
				k, v := randPair(be, rng, f.nq, f.kvC), randPair(be, rng, f.nq, f.kvC)
				out := newPair(be, f.nq, c.heads*c.hd, make([]float32, f.nq*c.heads*c.hd))
				be.AttendLocal(out.g, f.q.g, k.g, v.g, f.seqs, sh)
				ref.AttendLocal(out.c, f.q.c, k.c, v.c, f.seqs, sh)
				requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "AttendLocal")
				for _, p := range []*pair{k, v, out} {
					p.free(be)
				}
			})
		}
	}
}

func TestAttendRejectsBadInput(t *testing.T) {
	be := needGPU(t)
	sh := attnShape(4, 2, 8, 4)
	q, out := be.New(3, 32), be.New(3, 32)
	kc, vc := be.New(8, 16), be.New(8, 16)
	for name, c := range map[string]struct {
		seqs []kernels.AttnSeq
		sh   kernels.AttnShape
	}{
		"too few pages":     {[]kernels.AttnSeq{{QStart: 0, QLen: 1, CtxLen: 5, Pages: []int32{0}}}, sh},
		"page out of range": {[]kernels.AttnSeq{{QStart: 0, QLen: 1, CtxLen: 2, Pages: []int32{2}}}, sh},
		"rows out of range": {[]kernels.AttnSeq{{QStart: 2, QLen: 2, CtxLen: 2, Pages: []int32{0}}}, sh},
		"qlen over ctx":     {[]kernels.AttnSeq{{QStart: 0, QLen: 3, CtxLen: 2, Pages: []int32{0}}}, sh},
		"heads not grouped": {nil, attnShape(4, 3, 8, 4)},
		"head dim too big":  {nil, attnShape(1, 1, 512, 4)},
	} {
		requirePanics(t, name, func() { be.Attend(out, q, kc, vc, c.seqs, c.sh) })
	}
}

// TestAttendFlashDecoding checks the split of long contexts into
// attnChunk-key work items merged by attention_merge (flash-decoding)
// against the CPU backend, at attnTol, on a sample of the grid of contexts
// 1 to 8192 and batches 1 to 64 (8 at the longest context, for time):
// contexts below, at and above one chunk,
// and many chunks; within a batch the contexts differ by a few tokens so
// that chunk boundaries fall differently. Prefill chunks after a long
// cached prefix split too, with rows that see none of a chunk's keys.
func TestAttendFlashDecoding(t *testing.T) {
	be := needGPU(t)
	sh := attnShape(8, 2, 32, 16)
	for _, ctx := range []int{1, 2, 17, 255, 256, 257, 1024, 8192} {
		for _, batch := range []int{1, 3, 64} {
			if ctx == 8192 && batch == 64 {
				batch = 8 // 64 long contexts would take the emulator half a minute
			}
			t.Run(fmt.Sprintf("ctx=%d/batch=%d", ctx, batch), func(t *testing.T) {
				specs := make([]seqSpec, batch)
				for i := range specs {
					specs[i] = seqSpec{1, max(1, ctx-i%3)}
				}
				checkAttendSpecs(t, be, sh, specs, uint64(ctx*100+batch))
			})
		}
	}
	t.Run("prefill after a long prefix", func(t *testing.T) {
		checkAttendSpecs(t, be, sh, []seqSpec{{40, 1000}, {9, 600}, {1, 513}}, 7)
	})
}

// checkAttendSpecs compares Attend on both backends for one batch.
func checkAttendSpecs(t *testing.T, be *Backend, sh kernels.AttnShape, specs []seqSpec, seed uint64) {
	t.Helper()
	f := newAttnFixture(be, newRand(seed), sh, specs)
	defer f.free(be)
	cols := sh.NumHeads * sh.HeadDim
	out := newPair(be, f.nq, cols, make([]float32, f.nq*cols))
	defer out.free(be)
	be.Attend(out.g, f.q.g, f.kc.g, f.vc.g, f.seqs, f.sh)
	ref.Attend(out.c, f.q.c, f.kc.c, f.vc.c, f.seqs, f.sh)
	requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "Attend")
}

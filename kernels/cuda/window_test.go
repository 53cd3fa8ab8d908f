//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"kvlab/kernels"
)

// windowCase is one sliding-window attention batch: the window, the soft
// cap (0: none) and the sequences.
type windowCase struct {
	window  int
	softCap float32
	specs   []seqSpec
}

// windowDecodes returns batch decode steps whose contexts are ctx, ctx-7,
// ctx-14, ... (at least 1), so that window starts and chunk boundaries
// fall differently in one batch.
func windowDecodes(ctx, batch int) []seqSpec {
	specs := make([]seqSpec, batch)
	for i := range specs {
		specs[i] = seqSpec{1, max(1, ctx-7*i)}
	}
	return specs
}

// TestAttendWindow compares windowed (and soft-capped) Attend with the CPU
// backend at attnTol: windows below, at and above the block size (16) and
// the flash-decoding chunk (attnChunk = 256), contexts from 1 to 2048 (some
// inside the window, most past it), decode batches of 1 to 16, prefill
// chunks after cached prefixes mixed with decode rows, and GQA groups 1
// and 4, each with and without a soft cap.
func TestAttendWindow(t *testing.T) {
	be := needGPU(t)
	var cases []windowCase
	for _, w := range []int{1, 7, 16, 40, 255, 256, 300, 1000} {
		for _, ctx := range []int{1, 16, 17, 257, 700, 2048} {
			if ctx < w && ctx > 17 {
				continue // inside the window: the small contexts cover it
			}
			for _, batch := range []int{1, 16} {
				if ctx == 2048 && batch == 16 && w != 300 {
					batch = 4 // the emulator's time
				}
				cases = append(cases, windowCase{w, 0, windowDecodes(ctx, batch)})
			}
		}
		cases = append(cases, windowCase{w, 0, []seqSpec{{40, 1000}, {9, 600}, {1, 513}, {33, 33}, {5, 20}}})
	}
	// The soft cap, on a sample of the above; 1.5 is small enough to bend
	// most scores (softmax of q·k/√d for q, k in [-1, 1)).
	for i, c := range cases {
		if i%3 == 0 {
			cases = append(cases, windowCase{c.window, 1.5, c.specs})
		}
	}
	// A soft cap without a window.
	cases = append(cases, windowCase{0, 1.5, mixed}, windowCase{0, 50, windowDecodes(600, 3)})
	for _, hd := range []struct{ heads, kvHeads int }{{8, 2}, {4, 4}} {
		for i, c := range cases {
			if hd.heads == 4 && i%4 != 0 {
				continue
			}
			name := fmt.Sprintf("h%d-kv%d/w%d-cap%v-seqs%d-ctx%d", hd.heads, hd.kvHeads, c.window, c.softCap, len(c.specs), c.specs[0].ctx)
			t.Run(name, func(t *testing.T) {
				sh := attnShape(hd.heads, hd.kvHeads, 32, 16)
				sh.Window, sh.SoftCap = c.window, c.softCap
				checkAttendSpecs(t, be, sh, c.specs, uint64(1000*c.window+i))
			})
		}
	}
}

// TestAttendWindowBlockSizes runs windowed prefill and decode with block
// sizes 1, 4 and 64 (windows below, at and above each) and head dim 7 (the
// kernel's scalar path).
func TestAttendWindowBlockSizes(t *testing.T) {
	be := needGPU(t)
	specs := []seqSpec{{1, 300}, {12, 90}, {1, 3}, {30, 30}}
	for _, bs := range []int{1, 4, 64} {
		for _, w := range []int{bs - 1, bs, bs + 1, 70} {
			if w <= 0 {
				continue
			}
			for _, hd := range []int{7, 64} {
				t.Run(fmt.Sprintf("bs%d-w%d-hd%d", bs, w, hd), func(t *testing.T) {
					sh := attnShape(8, 2, hd, bs)
					sh.Window, sh.SoftCap = w, float32(w%2)*2 // every other one capped
					checkAttendSpecs(t, be, sh, specs, uint64(bs*100+w))
				})
			}
		}
	}
}

// TestAttendLocalWindow compares windowed AttendLocal (whole prompts and
// chunks) with the CPU backend.
func TestAttendLocalWindow(t *testing.T) {
	be := needGPU(t)
	for _, w := range []int{1, 5, 16, 33, 300} {
		for _, softCap := range []float32{0, 1.5} {
			t.Run(fmt.Sprintf("w%d-cap%v", w, softCap), func(t *testing.T) {
				rng := newRand(uint64(w))
				sh := attnShape(8, 2, 32, 4)
				sh.Window, sh.SoftCap = w, softCap
				f := newAttnFixture(be, rng, sh, []seqSpec{{1, 1}, {40, 40}, {9, 20}, {300, 300}})
				defer f.free(be)
				k, v := randPair(be, rng, f.nq, f.kvC), randPair(be, rng, f.nq, f.kvC)
				out := newPair(be, f.nq, 8*32, make([]float32, f.nq*8*32))
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

// TestAttendWindowNeverReads poisons with NaN the keys and values of every
// position before the window of each sequence's first query row: the CPU
// never reads them, and the GPU must not either (a key that is read and
// then masked would still put 0·NaN into the output).
func TestAttendWindowNeverReads(t *testing.T) {
	be := needGPU(t)
	for _, w := range []int{1, 20, 256, 300} {
		t.Run(fmt.Sprintf("w%d", w), func(t *testing.T) {
			sh := attnShape(8, 2, 32, 16)
			sh.Window = w
			f := newAttnFixture(be, newRand(uint64(w)), sh, []seqSpec{{1, 2000}, {1, 777}, {24, 600}, {3, 40}})
			defer f.free(be)
			f.poisonBefore(be, sh, func(s kernels.AttnSeq) int { return kernels.Visible(s.CtxLen-s.QLen, w) })
			cols := sh.NumHeads * sh.HeadDim
			out := newPair(be, f.nq, cols, make([]float32, f.nq*cols))
			defer out.free(be)
			be.Attend(out.g, f.q.g, f.kc.g, f.vc.g, f.seqs, sh)
			ref.Attend(out.c, f.q.c, f.kc.c, f.vc.c, f.seqs, sh)
			requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "Attend")
		})
	}
}

// TestAttendWindowSkipsChunks checks the plan of a long windowed decode:
// only the attnChunk chunks that hold a visible key become work items, the
// first starting at the tile of the window's first key.
func TestAttendWindowSkipsChunks(t *testing.T) {
	be := needGPU(t)
	for _, c := range []struct {
		ctx, window int
		key0        []int32 // the items' first keys
	}{
		{2000, 300, []int32{1696, 1792}}, // keys 1700..1999: chunks 6 and 7
		{2000, 200, []int32{1792}},       // keys 1800..1999: chunk 7 alone, not split
		{2000, 0, []int32{0, 256, 512, 768, 1024, 1280, 1536, 1792}},
		{513, 256, []int32{256, 512}}, // keys 257..512
		{100, 300, []int32{0}},        // the window reaches past position 0
	} {
		sh := attnShape(8, 2, 32, 16)
		sh.Window = c.window
		f := newAttnFixture(be, newRand(3), sh, []seqSpec{{1, c.ctx}})
		out := be.New(1, 8*32)
		be.Attend(out, f.q.g, f.kc.g, f.vc.g, f.seqs, sh)
		var key0 []int32
		for i := 0; i < len(be.plan.items); i += 4 {
			key0 = append(key0, be.plan.items[i+2])
		}
		if fmt.Sprint(key0) != fmt.Sprint(c.key0) {
			t.Errorf("context %d, window %d: items start at keys %v, want %v", c.ctx, c.window, key0, c.key0)
		}
		be.Free(out)
		f.free(be)
	}
}

// TestAttendWindowOffByOne checks that the comparison would catch the
// classic mistake: the GPU's result for a window one position wider (the
// query plus W keys before it, instead of W-1) is far outside attnTol of
// the CPU's, in decode and in prefill.
func TestAttendWindowOffByOne(t *testing.T) {
	be := needGPU(t)
	for _, w := range []int{1, 16, 256} {
		for _, specs := range [][]seqSpec{windowDecodes(600, 3), {{20, 400}}} {
			sh := attnShape(8, 2, 32, 16)
			sh.Window = w
			f := newAttnFixture(be, newRand(uint64(w)), sh, specs)
			cols := sh.NumHeads * sh.HeadDim
			out := newPair(be, f.nq, cols, make([]float32, f.nq*cols))
			ref.Attend(out.c, f.q.c, f.kc.c, f.vc.c, f.seqs, sh)
			want := out.cpuData()
			for _, gw := range []int{w, w + 1} {
				wide := sh
				wide.Window = gw
				be.Attend(out.g, f.q.g, f.kc.g, f.vc.g, f.seqs, wide)
				have := out.gpuData(be)
				worst := 0.0
				for i := range want {
					worst = max(worst, math.Abs(float64(have[i])-float64(want[i])))
				}
				if ok := worst <= attnTol; ok != (gw == w) {
					t.Errorf("window %d on the GPU vs %d on the CPU, %v: largest difference %.3g (tolerance %g)", gw, w, specs, worst, attnTol)
				}
			}
			out.free(be)
			f.free(be)
		}
	}
}

// poisonBefore sets every key and value of each sequence's positions
// before before(s) to NaN, on the device and in the host copy: a kernel
// that reads one, even to mask it, puts NaN into its output.
func (f *attnFixture) poisonBefore(be *Backend, sh kernels.AttnShape, before func(kernels.AttnSeq) int) {
	nan := float32(math.NaN())
	for _, p := range []*pair{f.kc, f.vc} {
		data := append([]float32(nil), p.host...)
		for _, s := range f.seqs {
			for pos := range before(s) {
				slot := int(s.Pages[pos/sh.BlockSize])*sh.BlockSize + pos%sh.BlockSize
				for c := range f.kvC {
					data[slot*f.kvC+c] = nan
				}
			}
		}
		p.free(be)
		*p = *newPair(be, f.kvRows, f.kvC, data)
	}
}

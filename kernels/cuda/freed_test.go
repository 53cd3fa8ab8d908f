//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"slices"
	"testing"

	"kvlab/kernels"
)

// TestAttendFreedPagesBeforeWindow gives the GPU page tables whose entries
// before kernels.FirstPage are -1 (blocks a sliding layer has given back)
// and poisons the keys and values those blocks held with NaN: the output
// must match the CPU backend's over the full page table.
func TestAttendFreedPagesBeforeWindow(t *testing.T) {
	be := needGPU(t)
	for _, w := range []int{1, 20, 256, 300} {
		t.Run(fmt.Sprintf("w%d", w), func(t *testing.T) {
			sh := attnShape(8, 2, 32, 16)
			sh.Window = w
			f := newAttnFixture(be, newRand(uint64(w)+7), sh, []seqSpec{{1, 2000}, {1, 777}, {24, 600}, {3, 40}})
			defer f.free(be)
			freed, holes := make([]kernels.AttnSeq, len(f.seqs)), 0
			for i, s := range f.seqs {
				s.Pages = slices.Clone(s.Pages)
				for j := range kernels.FirstPage(s, sh) {
					s.Pages[j] = -1
					holes++
				}
				freed[i] = s
			}
			if holes == 0 {
				t.Fatal("no page before any window: the case tests nothing")
			}
			f.poisonBefore(be, sh, func(s kernels.AttnSeq) int { return kernels.FirstPage(s, sh) * sh.BlockSize })
			cols := sh.NumHeads * sh.HeadDim
			out := newPair(be, f.nq, cols, make([]float32, f.nq*cols))
			defer out.free(be)
			be.Attend(out.g, f.q.g, f.kc.g, f.vc.g, freed, sh)
			ref.Attend(out.c, f.q.c, f.kc.c, f.vc.c, f.seqs, sh)
			requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "Attend")
		})
	}
}

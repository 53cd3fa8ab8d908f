package cpu_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestAttendFreedPagesBeforeWindow marks every page before
// kernels.FirstPage as given back (-1), as a pool that frees a sliding
// layer's old blocks does: the output must be bit for bit that of the full
// page table, for windows below, at and above the block size, decodes and
// chunks. A -1 on the first page the call reads must be refused.
func TestAttendFreedPagesBeforeWindow(t *testing.T) {
	specs := []seqSpec{{1, 1}, {1, 9}, {3, 12}, {8, 30}, {20, 45}, {1, 70}}
	for _, bs := range []int{1, 4, 16} {
		for _, w := range []int{1, 3, 4, 8, 16, 20} {
			t.Run(fmt.Sprintf("bs=%d/window=%d", bs, w), func(t *testing.T) {
				be := cpu.New()
				sh := windowShape(4, 2, 8, bs, w, 0)
				f := newAttnFixture(t, be, newRand(uint64(bs*100+w)), sh, specs)
				want := be.New(f.q.Rows(), f.q.Cols())
				be.Attend(want, f.q, f.kc, f.vc, f.seqs, sh)

				freed, holes := make([]kernels.AttnSeq, len(f.seqs)), 0
				for i, s := range f.seqs {
					s.Pages = slices.Clone(s.Pages)
					for j := range kernels.FirstPage(s, sh) {
						s.Pages[j] = -1
						holes++
					}
					freed[i] = s
				}
				got := be.New(f.q.Rows(), f.q.Cols())
				be.Attend(got, f.q, f.kc, f.vc, freed, sh)
				require.Equal(t, cpu.Data(want), cpu.Data(got))
				require.Positive(t, holes, "the case must free pages")
				for i, s := range freed {
					first := kernels.FirstPage(s, sh)
					if first == 0 {
						continue
					}
					bad := slices.Clone(freed)
					bad[i].Pages = slices.Clone(s.Pages)
					bad[i].Pages[first] = -1
					require.Panics(t, func() { be.Attend(got, f.q, f.kc, f.vc, bad, sh) }, "a freed page inside the window")
				}
			})
		}
	}
}

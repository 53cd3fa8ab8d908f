//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"kvlab/kernels"
)

// TestAttendRefusesWindow checks that a sliding-window or soft-capped call
// (Gemma-3) panics with a message saying so, rather than running full
// causal attention: the kernel does not implement either.
func TestAttendRefusesWindow(t *testing.T) {
	be := needGPU(t)
	q, out := be.New(1, 32), be.New(1, 32)
	kc, vc := be.New(8, 16), be.New(8, 16)
	seqs := []kernels.AttnSeq{{QStart: 0, QLen: 1, CtxLen: 2, Pages: []int32{0}}}
	for _, tc := range []struct {
		window  int
		softCap float32
	}{{4, 0}, {0, 50}} {
		sh := attnShape(4, 2, 8, 4)
		sh.Window, sh.SoftCap = tc.window, tc.softCap
		for _, local := range []bool{false, true} {
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				if local {
					be.AttendLocal(out, q, q, q, seqs, kernels.AttnShape{NumHeads: 4, NumKVHeads: 4, HeadDim: 8, Window: tc.window, SoftCap: tc.softCap})
				} else {
					be.Attend(out, q, kc, vc, seqs, sh)
				}
				return ""
			}()
			if !strings.Contains(msg, "not implemented on the CUDA backend") {
				t.Errorf("window %d, soft cap %v, local %v: panic %q; want a refusal", tc.window, tc.softCap, local, msg)
			}
		}
	}
}

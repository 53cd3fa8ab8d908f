package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// plainBackend hides the CPU backend's FromHostBF16, so that Load widens
// every weight to float32 as it does for other backends.
type plainBackend struct{ kernels.Backend }

// TestBF16WeightsHeldAsBF16 loads a bf16 checkpoint on the CPU backend,
// which keeps the 2-D weights as bf16, and again with every weight widened
// to float32, and checks that the logits agree bit for bit.
func TestBF16WeightsHeldAsBF16(t *testing.T) {
	for _, arch := range []string{ArchLlama, ArchQwen3} {
		for _, tied := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tied=%v", arch, tied), func(t *testing.T) {
				o := tinySynth(arch, 4)
				o.DType, o.Tied = "bf16", tied
				dir := t.TempDir()
				require.NoError(t, WriteSynthetic(dir, o))
				half, err := Load(dir, cpu.New())
				require.NoError(t, err)
				defer half.Close()
				full, err := Load(dir, plainBackend{cpu.New()})
				require.NoError(t, err)
				defer full.Close()

				for name, w := range half.weights {
					require.Equal(t, w.Rows() > 1, cpu.IsBF16(w), "%s (%d×%d) held as bf16", name, w.Rows(), w.Cols())
					require.False(t, cpu.IsBF16(full.weights[name]), "%s widened", name)
				}
				prompts := testPrompts(o.Vocab, 1, 6, 17)
				want := lastLogitsChunked(full, prompts, []int{1, 2, 5}, newPagedKV(full, 16, 4))
				have := lastLogitsChunked(half, prompts, []int{1, 2, 5}, newPagedKV(half, 16, 4))
				for i := range want {
					for j := range want[i] {
						if math.Float32bits(have[i][j]) != math.Float32bits(want[i][j]) {
							t.Fatalf("prompt %d logit %d: bf16 weights give %v, float32 %v", i, j, have[i][j], want[i][j])
						}
					}
				}
			})
		}
	}
}

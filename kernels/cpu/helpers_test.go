package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// newRand returns a deterministic generator so that a failure reproduces.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// randFloats returns n values uniform in [-1, 1).
func randFloats(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 2*rng.Float32() - 1
	}
	return out
}

// randTensor returns a rows×cols tensor of values uniform in [-1, 1).
func randTensor(b *cpu.Backend, rng *rand.Rand, rows, cols int) kernels.Tensor {
	return b.FromHost(rows, cols, randFloats(rng, rows*cols))
}

// requireClose fails unless every have[i] is within tol·max(1, |want[i]|) of
// want[i].
func requireClose(t *testing.T, have []float32, want []float64, tol float64, what string) {
	t.Helper()
	require.Len(t, have, len(want), "%s: length", what)
	for i := range want {
		diff := math.Abs(float64(have[i]) - want[i])
		if diff > tol*math.Max(1, math.Abs(want[i])) || math.IsNaN(float64(have[i])) {
			require.Failf(t, "not close", "%s[%d]: have %v; want %v (diff %g)", what, i, have[i], want[i], diff)
		}
	}
}

// requireBitEqual fails unless have and want hold the same bit patterns.
func requireBitEqual(t *testing.T, have, want []float32, what string) {
	t.Helper()
	require.Len(t, have, len(want), "%s: length", what)
	for i := range want {
		if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
			require.Failf(t, "not bit-identical", "%s[%d]: have %v; want %v", what, i, have[i], want[i])
		}
	}
}

// naiveMatMulT is the triple loop, in float64.
func naiveMatMulT(x, w []float32, n, in, out int) []float64 {
	res := make([]float64, n*out)
	for i := range n {
		for j := range out {
			var s float64
			for k := range in {
				s += float64(x[i*in+k]) * float64(w[j*in+k])
			}
			res[i*out+j] = s
		}
	}
	return res
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"testing"

	"kvlab/common/model"
	"kvlab/kernels"
)

func TestGELUTanhMul(t *testing.T) {
	be := needGPU(t)
	rng := newRand(31)
	for _, s := range shapes {
		g := newPair(be, s.rows, s.cols, randFloats(rng, s.rows*s.cols, 12)) // both tails of gelu
		u := randPair(be, rng, s.rows, s.cols)
		d := randPair(be, rng, s.rows, s.cols)
		be.GELUTanhMul(d.g, g.g, u.g)
		ref.GELUTanhMul(d.c, g.c, u.c)
		requireClose(t, d.gpuData(be), d.cpuData(), opTol, fmt.Sprintf("GELUTanhMul %d×%d", s.rows, s.cols))
		for _, p := range []*pair{g, u, d} {
			p.free(be)
		}
	}
}

func TestSoftCap(t *testing.T) {
	be := needGPU(t)
	rng := newRand(32)
	for _, limit := range []float32{1.5, 30, 50} {
		for _, s := range shapes {
			x := newPair(be, s.rows, s.cols, randFloats(rng, s.rows*s.cols, 100)) // inside and far past the cap
			be.SoftCap(x.g, limit)
			ref.SoftCap(x.c, limit)
			requireClose(t, x.gpuData(be), x.cpuData(), opTol, fmt.Sprintf("SoftCap(%v) %d×%d", limit, s.rows, s.cols))
			x.free(be)
		}
	}
}

// TestScale checks the embedding scale without a rounding (on the GPU) and
// with one (bf16 rounding, on the host), bit for bit: both are one float32
// product per element.
func TestScale(t *testing.T) {
	be := needGPU(t)
	rng := newRand(33)
	bf16 := func(f float32) float32 { return model.RoundToDType(f, model.DTypeBF16) }
	for _, round := range []func(float32) float32{nil, bf16} {
		for _, s := range shapes {
			x := newPair(be, s.rows, s.cols, randFloats(rng, s.rows*s.cols, 1))
			be.Scale(x.g, 45.25, round)
			ref.Scale(x.c, 45.25, round)
			requireEqual(t, x.gpuData(be), x.cpuData(), fmt.Sprintf("Scale (rounded %v) %d×%d", round != nil, s.rows, s.cols))
			x.free(be)
		}
	}
}

// TestGemmaOpsInterface checks that the backend offers kernels.GemmaOps
// through the kernels.Backend interface, as model.Load looks for it.
func TestGemmaOpsInterface(t *testing.T) {
	be := needGPU(t)
	if _, ok := kernels.Backend(be).(kernels.GemmaOps); !ok {
		t.Fatal("the CUDA backend does not implement kernels.GemmaOps")
	}
}

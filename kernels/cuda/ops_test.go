//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"
)

// Tolerances of the element-wise and row kernels. They agree with the CPU
// backend far more closely than this (most are exact or within an ulp or
// two); 1e-5 relative (absolute below 1) leaves room for expf and for
// reductions summed in another order, while any indexing bug is off by
// order 1.
const opTol = 1e-5

var shapes = []struct{ rows, cols int }{{1, 1}, {3, 7}, {17, 33}, {64, 2048}, {300, 517}}

func TestAdd(t *testing.T) {
	be := needGPU(t)
	rng := newRand(1)
	for _, s := range shapes {
		d, x := randPair(be, rng, s.rows, s.cols), randPair(be, rng, s.rows, s.cols)
		be.Add(d.g, x.g)
		ref.Add(d.c, x.c)
		requireClose(t, d.gpuData(be), d.cpuData(), opTol, fmt.Sprintf("Add %d×%d", s.rows, s.cols))
		d.free(be)
		x.free(be)
	}
}

func TestSiLUMul(t *testing.T) {
	be := needGPU(t)
	rng := newRand(2)
	for _, s := range shapes {
		g := newPair(be, s.rows, s.cols, randFloats(rng, s.rows*s.cols, 12)) // reach both tails of silu
		u := randPair(be, rng, s.rows, s.cols)
		d := randPair(be, rng, s.rows, s.cols)
		be.SiLUMul(d.g, g.g, u.g)
		ref.SiLUMul(d.c, g.c, u.c)
		requireClose(t, d.gpuData(be), d.cpuData(), opTol, fmt.Sprintf("SiLUMul %d×%d", s.rows, s.cols))
		for _, p := range []*pair{g, u, d} {
			p.free(be)
		}
	}
}

func TestRMSNorm(t *testing.T) {
	be := needGPU(t)
	rng := newRand(3)
	for _, s := range shapes {
		x := newPair(be, s.rows, s.cols, randFloats(rng, s.rows*s.cols, 4))
		w := randPair(be, rng, 1, s.cols)
		d := randPair(be, rng, s.rows, s.cols)
		be.RMSNorm(d.g, x.g, w.g, 1e-6)
		ref.RMSNorm(d.c, x.c, w.c, 1e-6)
		requireClose(t, d.gpuData(be), d.cpuData(), opTol, fmt.Sprintf("RMSNorm %d×%d", s.rows, s.cols))
		// In place, as the model's final norm runs.
		be.RMSNorm(x.g, x.g, w.g, 1e-5)
		ref.RMSNorm(x.c, x.c, w.c, 1e-5)
		requireClose(t, x.gpuData(be), x.cpuData(), opTol, fmt.Sprintf("RMSNorm in place %d×%d", s.rows, s.cols))
		for _, p := range []*pair{x, w, d} {
			p.free(be)
		}
	}
}

func TestRMSNormHeads(t *testing.T) {
	be := needGPU(t)
	rng := newRand(4)
	for _, c := range []struct{ rows, heads, hd int }{{1, 1, 8}, {5, 4, 24}, {33, 8, 128}, {7, 3, 256}} {
		x := newPair(be, c.rows, c.heads*c.hd, randFloats(rng, c.rows*c.heads*c.hd, 3))
		w := randPair(be, rng, 1, c.hd)
		be.RMSNormHeads(x.g, w.g, c.hd, 1e-6)
		ref.RMSNormHeads(x.c, w.c, c.hd, 1e-6)
		requireClose(t, x.gpuData(be), x.cpuData(), opTol, fmt.Sprintf("RMSNormHeads %+v", c))
		x.free(be)
		w.free(be)
	}
}

// llamaInvFreq returns RoPE inverse frequencies with Llama-3's base.
func llamaInvFreq(hd int) []float32 {
	f := make([]float32, hd/2)
	for i := range f {
		f[i] = float32(1 / math.Pow(500000, float64(2*i)/float64(hd)))
	}
	return f
}

func TestRoPE(t *testing.T) {
	be := needGPU(t)
	rng := newRand(5)
	for _, c := range []struct{ rows, heads, hd int }{{1, 1, 2}, {9, 4, 8}, {40, 8, 64}, {13, 2, 128}, {3, 2, 256}} {
		pos := make([]int32, c.rows)
		for i := range pos {
			pos[i] = int32(rng.IntN(100000))
		}
		pos[0] = 0
		inv := llamaInvFreq(c.hd)
		x := randPair(be, rng, c.rows, c.heads*c.hd)
		be.RoPE(x.g, pos, c.hd, inv)
		ref.RoPE(x.c, pos, c.hd, inv)
		requireClose(t, x.gpuData(be), x.cpuData(), opTol, fmt.Sprintf("RoPE %+v", c))
		x.free(be)
	}
}

func TestEmbedAndGatherRows(t *testing.T) {
	be := needGPU(t)
	rng := newRand(6)
	table := randPair(be, rng, 50, 96)
	ids := []int32{3, 0, 49, 3, 17}
	d := newPair(be, len(ids), 96, make([]float32, len(ids)*96))
	be.Embed(d.g, table.g, ids)
	ref.Embed(d.c, table.c, ids)
	requireEqual(t, d.gpuData(be), d.cpuData(), "Embed")

	rows := []int32{49, 1}
	g := newPair(be, len(rows), 96, make([]float32, len(rows)*96))
	be.GatherRows(g.g, table.g, rows)
	ref.GatherRows(g.c, table.c, rows)
	requireEqual(t, g.gpuData(be), g.cpuData(), "GatherRows")

	requirePanics(t, "Embed of an id past the table", func() { be.Embed(d.g, table.g, []int32{0, 1, 2, 3, 50}) })
	requirePanics(t, "GatherRows of a negative row", func() { be.GatherRows(g.g, table.g, []int32{-1, 0}) })
	for _, p := range []*pair{table, d, g} {
		p.free(be)
	}
}

func TestWriteKVAndCopyBlock(t *testing.T) {
	be := needGPU(t)
	rng := newRand(7)
	const bs, blocks, cols = 4, 6, 40
	kc, vc := randPair(be, rng, bs*blocks, cols), randPair(be, rng, bs*blocks, cols)
	k, v := randPair(be, rng, 5, cols), randPair(be, rng, 5, cols)
	slots := []int32{4, -1, 9, 23, -7} // negative: already cached, must not be written
	be.WriteKV(kc.g, vc.g, k.g, v.g, slots)
	ref.WriteKV(kc.c, vc.c, k.c, v.c, slots)
	requireEqual(t, kc.gpuData(be), kc.cpuData(), "WriteKV keys")
	requireEqual(t, vc.gpuData(be), vc.cpuData(), "WriteKV values")

	be.CopyBlock(kc.g, vc.g, 2, 5, bs)
	ref.CopyBlock(kc.c, vc.c, 2, 5, bs)
	requireEqual(t, kc.gpuData(be), kc.cpuData(), "CopyBlock keys")
	requireEqual(t, vc.gpuData(be), vc.cpuData(), "CopyBlock values")

	requirePanics(t, "WriteKV past the cache", func() { be.WriteKV(kc.g, vc.g, k.g, v.g, []int32{0, 1, 2, 3, 24}) })
	requirePanics(t, "CopyBlock past the cache", func() { be.CopyBlock(kc.g, vc.g, 0, blocks, bs) })
	for _, p := range []*pair{kc, vc, k, v} {
		p.free(be)
	}
}

func TestSoftmaxRows(t *testing.T) {
	be := needGPU(t)
	rng := newRand(8)
	for _, cols := range []int{1, 7, 1000, 128256} {
		x := newPair(be, 3, cols, randFloats(rng, 3*cols, 15))
		be.SoftmaxRows(x.g)
		ref.SoftmaxRows(x.c)
		have, want := x.gpuData(be), x.cpuData()
		// Probabilities are small: compare relatively, not against 1.
		var rel float64
		for i := range want {
			rel = math.Max(rel, math.Abs(float64(have[i]-want[i]))/math.Max(math.Abs(float64(want[i])), 1e-30))
		}
		recordErr("SoftmaxRows", len(want), rel, opTol, "relative")
		for i := range want {
			if d := math.Abs(float64(have[i] - want[i])); !(d <= opTol*math.Abs(float64(want[i]))+1e-30) {
				t.Fatalf("SoftmaxRows cols=%d [%d]: gpu %v, cpu %v", cols, i, have[i], want[i])
			}
		}
		x.free(be)
	}
}

func TestArgmaxRows(t *testing.T) {
	be := needGPU(t)
	rng := newRand(9)
	const rows, cols = 6, 128256
	data := randFloats(rng, rows*cols, 10)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	row := func(r int) []float32 { return data[r*cols : (r+1)*cols] }
	row(1)[900], row(1)[70000], row(1)[5] = 50, 50, 50 // tie: the smallest column wins
	row(2)[0] = nan                                    // NaNs are never chosen...
	row(2)[cols-1] = 99
	for i := range row(3) { // ...unless the row holds nothing else
		row(3)[i] = nan
	}
	for i := range row(4) {
		row(4)[i] = float32(math.Inf(-1))
	}
	row(5)[12345] = inf
	x := newPair(be, rows, cols, data)
	have, want := be.ArgmaxRows(x.g), ref.ArgmaxRows(x.c)
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Fatalf("ArgmaxRows: gpu %v, cpu %v", have, want)
	}
	x.free(be)
}

func TestTensorMemory(t *testing.T) {
	be := needGPU(t)
	data := []float32{1, 2, 3, 4, 5, 6}
	x := be.FromHost(3, 2, data)
	if got := be.ToHost(x, make([]float32, 6)); fmt.Sprint(got) != fmt.Sprint(data) {
		t.Fatalf("round trip: %v", got)
	}
	v := be.View(x, 1, 2)
	if got := be.ToHost(v, make([]float32, 4)); fmt.Sprint(got) != "[3 4 5 6]" {
		t.Fatalf("view: %v", got)
	}
	z := be.New(2, 3)
	if got := be.ToHost(z, make([]float32, 6)); fmt.Sprint(got) != "[0 0 0 0 0 0]" {
		t.Fatalf("New is not zeroed: %v", got)
	}
	e := be.New(0, 5) // empty tensors hold no device memory
	be.Free(e)
	be.Free(x)
	requirePanics(t, "ToHost of a view of a freed tensor", func() { be.ToHost(v, make([]float32, 4)) })
	be.Free(z)
}

// TestOpsOnViews runs kernels on row views at an offset, the way the model
// uses its scratch tensors, so that a pointer-offset bug cannot hide behind
// tensors that all start at row 0.
func TestOpsOnViews(t *testing.T) {
	be := needGPU(t)
	rng := newRand(10)
	big := randPair(be, rng, 10, 64)
	w := randPair(be, rng, 1, 64)
	gv, cv := be.View(big.g, 3, 4), ref.View(big.c, 3, 4)
	be.RMSNorm(gv, gv, w.g, 1e-6)
	ref.RMSNorm(cv, cv, w.c, 1e-6)
	requireClose(t, big.gpuData(be), big.cpuData(), opTol, "RMSNorm on a view")
	big.free(be)
	w.free(be)
}

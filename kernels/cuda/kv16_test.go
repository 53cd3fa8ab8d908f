//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"testing"

	"kvlab/kernels"
)

var kv16DTypes = []kernels.KVDType{kernels.KVBF16, kernels.KVF16}

// kv16Values returns n values that exercise the rounding: normal ones,
// float16's subnormals and overflow, ties, signed zeros and infinities.
func kv16Values(n int, seed uint64) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), 65504, 65519, 65520, -70000, 0x1p-24, 0x1p-25,
		3 * 0x1p-26, 1e-30, float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), 1 + 0x1p-11, 1 + 3*0x1p-11}
	out := randFloats(newRand(seed), n, 4)
	copy(out, special)
	return out
}

// TestWriteKV16 checks WriteKV into a 16-bit cache bit for bit against the
// CPU backend: the stored values (read back widened), the rows of k and v
// left rounded (a skipped row too), and CopyBlock.
func TestWriteKV16(t *testing.T) {
	be := needGPU(t)
	for _, dt := range kv16DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			const rows, cols = 12, 37
			kg, vg := be.NewKV(rows, cols, dt), be.NewKV(rows, cols, dt)
			kr, vr := ref.NewKV(rows, cols, dt), ref.NewKV(rows, cols, dt)
			defer be.Free(kg)
			defer be.Free(vg)
			k := newPair(be, 3, cols, kv16Values(3*cols, 1))
			v := newPair(be, 3, cols, kv16Values(3*cols, 2))
			defer k.free(be)
			defer v.free(be)
			slots := []int32{5, -1, 2}
			be.WriteKV(kg, vg, k.g, v.g, slots)
			ref.WriteKV(kr, vr, k.c, v.c, slots)
			requireEqual(t, k.gpuData(be), k.cpuData(), "WriteKV16 k left rounded")
			requireEqual(t, v.gpuData(be), v.cpuData(), "WriteKV16 v left rounded")
			host := func(t kernels.Tensor, be kernels.Backend) []float32 {
				return be.ToHost(t, make([]float32, rows*cols))
			}
			requireEqual(t, host(kg, be), host(kr, ref), "WriteKV16 K cache")
			requireEqual(t, host(vg, be), host(vr, ref), "WriteKV16 V cache")
			be.CopyBlock(kg, vg, 1, 3, 2) // blocks of 2 rows: rows 2, 3 onto 6, 7
			ref.CopyBlock(kr, vr, 1, 3, 2)
			requireEqual(t, host(kg, be), host(kr, ref), "CopyBlock16 K cache")
			requireEqual(t, host(vg, be), host(vr, ref), "CopyBlock16 V cache")
			requireEqual(t, be.ToHost(be.View(kg, 5, 1), make([]float32, cols)), ref.ToHost(ref.View(kr, 5, 1), make([]float32, cols)), "View16 of a cache row")
		})
	}
}

// TestAttend16 holds attention over a 16-bit cache to the CPU backend's
// over the same cache, within attnTol: both widen the same bits exactly,
// so what is left is the order of additions, as for float32. The cases
// cover the vector and the scalar paths (head dims 64, 128 and 7), GQA,
// pages of 1 and 16, decodes split over several chunks (flash decoding),
// prefill chunks, a window and a soft cap.
func TestAttend16(t *testing.T) {
	be := needGPU(t)
	cases := []struct {
		heads, kvHeads, hd, bs int
		window                 int
		softCap                float32
		specs                  []seqSpec
	}{
		{8, 2, 64, 16, 0, 0, mixed},
		{8, 4, 7, 1, 0, 0, mixed},
		{16, 2, 128, 16, 0, 0, []seqSpec{{1, 700}, {1, 1}, {20, 129}}},
		{4, 1, 256, 16, 40, 1.5, []seqSpec{{1, 300}, {9, 60}}},
	}
	for _, dt := range kv16DTypes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/h%d-kv%d-hd%d-bs%d-w%d", dt, c.heads, c.kvHeads, c.hd, c.bs, c.window), func(t *testing.T) {
				sh := attnShape(c.heads, c.kvHeads, c.hd, c.bs)
				sh.Window, sh.SoftCap = c.window, c.softCap
				f := newAttnFixture(be, newRand(uint64(c.hd*100+c.bs)), sh, c.specs)
				defer f.free(be)
				kg, vg := be.NewKV(f.kvRows, f.kvC, dt), be.NewKV(f.kvRows, f.kvC, dt)
				defer be.Free(kg)
				defer be.Free(vg)
				kr, vr := ref.NewKV(f.kvRows, f.kvC, dt), ref.NewKV(f.kvRows, f.kvC, dt)
				slots := make([]int32, f.kvRows)
				for i := range slots {
					slots[i] = int32(i)
				}
				be.WriteKV(kg, vg, f.kc.g, f.vc.g, slots)
				ref.WriteKV(kr, vr, f.kc.c, f.vc.c, slots)
				out := newPair(be, f.nq, c.heads*c.hd, make([]float32, f.nq*c.heads*c.hd))
				defer out.free(be)
				be.Attend(out.g, f.q.g, kg, vg, f.seqs, sh)
				ref.Attend(out.c, f.q.c, kr, vr, f.seqs, sh)
				requireClose(t, out.gpuData(be), out.cpuData(), attnTol, "Attend over a "+dt.String()+" cache")
			})
		}
	}
	requirePanics(t, "a 16-bit cache as AttendLocal's k", func() {
		k := be.NewKV(4, 8, kernels.KVBF16)
		defer be.Free(k)
		q := be.New(4, 8)
		defer be.Free(q)
		be.AttendLocal(q, q, k, k, []kernels.AttnSeq{{QLen: 4, CtxLen: 4}}, attnShape(1, 1, 8, 4))
	})
}

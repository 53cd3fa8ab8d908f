package cpu_test

import (
	"fmt"
	"testing"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// BenchmarkAttendDecodeKV measures decode attention over a long context
// with the cache in each dtype: the keys and values of every position are
// read once per step, so a 16-bit cache reads half the bytes. The pages
// are scattered over the pool (attnBench) or in order, as a lone
// sequence's blocks come from a fresh pool.
func BenchmarkAttendDecodeKV(b *testing.B) {
	be := cpu.New()
	for _, ctx := range []int{4096, 16384} {
		for _, pages := range []string{"scattered", "in-order"} {
			for _, dt := range kernels.KVDTypes {
				b.Run(fmt.Sprintf("ctx=%d/pages=%s/kv=%v", ctx, pages, dt), func(b *testing.B) {
					benchAttendKV(b, be, ctx, pages == "in-order", dt)
				})
			}
		}
	}
}

func benchAttendKV(b *testing.B, be *cpu.Backend, ctx int, inOrder bool, dt kernels.KVDType) {
	out, q, kc, vc, as := attnBench(be, 1, ctx, 1, benchShape)
	if inOrder {
		for i := range as[0].Pages {
			as[0].Pages[i] = int32(i)
		}
	}
	kc, vc = asKV(be, kc, vc, dt)
	for b.Loop() {
		be.Attend(out, q, kc, vc, as, benchShape)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkAttendPrefillKV is BenchmarkAttendPrefill with the cache in
// each dtype.
func BenchmarkAttendPrefillKV(b *testing.B) {
	be := cpu.New()
	for _, c := range []struct{ ctx, qlen int }{{512, 512}, {1024, 256}} {
		for _, dt := range kernels.KVDTypes {
			b.Run(fmt.Sprintf("ctx=%d,chunk=%d/kv=%v", c.ctx, c.qlen, dt), func(b *testing.B) {
				out, q, kc, vc, as := attnBench(be, 1, c.ctx, c.qlen, benchShape)
				kc, vc = asKV(be, kc, vc, dt)
				for b.Loop() {
					be.Attend(out, q, kc, vc, as, benchShape)
				}
				b.ReportMetric(float64(c.qlen*b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// asKV returns the caches kc and vc held in dt (themselves for f32).
func asKV(be *cpu.Backend, kc, vc kernels.Tensor, dt kernels.KVDType) (kernels.Tensor, kernels.Tensor) {
	if dt == kernels.KVF32 {
		return kc, vc
	}
	rows, cols := kc.Rows(), kc.Cols()
	slots := make([]int32, rows)
	for i := range slots {
		slots[i] = int32(i)
	}
	k16, v16 := be.NewKV(rows, cols, dt), be.NewKV(rows, cols, dt)
	be.WriteKV(k16, v16, kc, vc, slots)
	return k16, v16
}

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
	if dt != kernels.KVF32 {
		rows, cols := kc.Rows(), kc.Cols()
		slots := make([]int32, rows)
		for i := range slots {
			slots[i] = int32(i)
		}
		k16, v16 := be.NewKV(rows, cols, dt), be.NewKV(rows, cols, dt)
		be.WriteKV(k16, v16, kc, vc, slots)
		kc, vc = k16, v16
	}
	for b.Loop() {
		be.Attend(out, q, kc, vc, as, benchShape)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

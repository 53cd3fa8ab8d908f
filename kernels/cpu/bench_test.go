package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// matMulShapes are projection shapes of small LLMs: a decode row, a prefill
// chunk through a fused QKV or MLP weight, and a square projection.
var matMulShapes = []struct{ n, in, out int }{
	{1, 512, 1536},
	{16, 512, 1536},
	{256, 512, 1536},
	{512, 1024, 1024},
	{256, 1024, 3072},
}

// llamaMLPShapes are a 512-token prefill chunk through Llama-3.2-1B's
// gate (or up) and down projections: weights of 32 MiB in bf16, larger
// than a core's cache, where the order of the jobs starts to matter.
var llamaMLPShapes = []struct{ n, in, out int }{
	{512, 2048, 8192},
	{512, 8192, 2048},
}

func reportGFLOPs(b *testing.B, flopsPerOp float64) {
	b.ReportMetric(flopsPerOp*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkMatMulT measures the batch-invariant MatMulT (AVX2+FMA kernels
// where the CPU has them; run with -tags purego for the Go kernels).
func BenchmarkMatMulT(b *testing.B) {
	be := cpu.New()
	for _, s := range matMulShapes {
		b.Run(fmt.Sprintf("n=%d,in=%d,out=%d", s.n, s.in, s.out), func(b *testing.B) {
			rng := newRand(1)
			x, w := randTensor(be, rng, s.n, s.in), randTensor(be, rng, s.out, s.in)
			dst := be.New(s.n, s.out)
			for b.Loop() {
				be.MatMulT(dst, x, w)
			}
			reportGFLOPs(b, 2*float64(s.n*s.in*s.out))
		})
	}
}

// BenchmarkMatMulTBF16 is BenchmarkMatMulT with bf16 weights: the tiles
// that widen each weight to float32 before the multiply (dots6x8 and
// dots3x4 over uint16).
func BenchmarkMatMulTBF16(b *testing.B) { benchMatMulTBF16(b, cpu.New()) }

// BenchmarkMatMulTBF16Dot is BenchmarkMatMulTBF16 with bf16 products
// (bf16dot.go): VDPBF16PS tiles on a CPU with AVX512-BF16, Go elsewhere;
// the time includes rounding x to bf16.
func BenchmarkMatMulTBF16Dot(b *testing.B) {
	if !cpu.BF16DotNative() {
		b.Skip("bf16 products run in Go on this CPU")
	}
	be := cpu.New()
	be.SetBF16Dot(true)
	benchMatMulTBF16(b, be)
}

func benchMatMulTBF16(b *testing.B, be *cpu.Backend) {
	for _, s := range append(matMulShapes[:len(matMulShapes):len(matMulShapes)], llamaMLPShapes...) {
		b.Run(fmt.Sprintf("n=%d,in=%d,out=%d", s.n, s.in, s.out), func(b *testing.B) {
			rng := newRand(1)
			x := randTensor(be, rng, s.n, s.in)
			w := be.FromHostBF16(s.out, s.in, randFloats(rng, s.out*s.in))
			dst := be.New(s.n, s.out)
			for b.Loop() {
				be.MatMulT(dst, x, w)
			}
			reportGFLOPs(b, 2*float64(s.n*s.in*s.out))
		})
	}
}

// BenchmarkSgemmWhole measures gonum's Sgemm on the whole product (not
// batch invariant), for comparison with MatMulT.
func BenchmarkSgemmWhole(b *testing.B) {
	for _, s := range matMulShapes {
		b.Run(fmt.Sprintf("n=%d,in=%d,out=%d", s.n, s.in, s.out), func(b *testing.B) {
			rng := newRand(1)
			x, w := randFloats(rng, s.n*s.in), randFloats(rng, s.out*s.in)
			c := make([]float32, s.n*s.out)
			impl := blas32.Implementation()
			for b.Loop() {
				impl.Sgemm(blas.NoTrans, blas.Trans, s.n, s.out, s.in, 1, x, s.in, w, s.in, 0, c, s.out)
			}
			reportGFLOPs(b, 2*float64(s.n*s.in*s.out))
		})
	}
}

// attnBench builds a paged cache holding seqs sequences of ctx tokens each,
// with pages scattered over the pool as they would be after some churn.
func attnBench(be *cpu.Backend, seqs, ctx, qlen int, sh kernels.AttnShape) (out, q, kc, vc kernels.Tensor, as []kernels.AttnSeq) {
	rng := newRand(2)
	perSeq := (ctx + sh.BlockSize - 1) / sh.BlockSize
	blocks := rng.Perm(seqs * perSeq)
	kvCols := sh.NumKVHeads * sh.HeadDim
	kc = randTensor(be, rng, seqs*perSeq*sh.BlockSize, kvCols)
	vc = randTensor(be, rng, seqs*perSeq*sh.BlockSize, kvCols)
	q = randTensor(be, rng, seqs*qlen, sh.NumHeads*sh.HeadDim)
	out = be.New(seqs*qlen, sh.NumHeads*sh.HeadDim)
	for s := range seqs {
		pages := make([]int32, perSeq)
		for i := range pages {
			pages[i] = int32(blocks[s*perSeq+i])
		}
		as = append(as, kernels.AttnSeq{QStart: s * qlen, QLen: qlen, CtxLen: ctx, Pages: pages})
	}
	return out, q, kc, vc, as
}

// attnFLOPs counts the multiply-adds of q·k and w·v for the given seqs.
func attnFLOPs(as []kernels.AttnSeq, sh kernels.AttnShape) float64 {
	var keys float64
	for _, s := range as {
		for i := range s.QLen {
			keys += float64(s.CtxLen - s.QLen + i + 1)
		}
	}
	return 4 * keys * float64(sh.NumHeads*sh.HeadDim)
}

var benchShape = kernels.AttnShape{NumHeads: 16, NumKVHeads: 8, HeadDim: 64, BlockSize: 16, Scale: float32(1 / math.Sqrt(64))}

func BenchmarkAttendDecode(b *testing.B) {
	be := cpu.New()
	for _, c := range []struct{ seqs, ctx int }{{1, 512}, {16, 512}, {64, 1024}} {
		b.Run(fmt.Sprintf("seqs=%d,ctx=%d", c.seqs, c.ctx), func(b *testing.B) {
			out, q, kc, vc, as := attnBench(be, c.seqs, c.ctx, 1, benchShape)
			for b.Loop() {
				be.Attend(out, q, kc, vc, as, benchShape)
			}
			reportGFLOPs(b, attnFLOPs(as, benchShape))
			b.ReportMetric(float64(c.seqs*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

func BenchmarkAttendPrefill(b *testing.B) {
	be := cpu.New()
	for _, c := range []struct{ ctx, qlen int }{{256, 256}, {512, 512}, {1024, 256}} {
		b.Run(fmt.Sprintf("ctx=%d,chunk=%d", c.ctx, c.qlen), func(b *testing.B) {
			out, q, kc, vc, as := attnBench(be, 1, c.ctx, c.qlen, benchShape)
			for b.Loop() {
				be.Attend(out, q, kc, vc, as, benchShape)
			}
			reportGFLOPs(b, attnFLOPs(as, benchShape))
			b.ReportMetric(float64(c.qlen*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkMatMulTDecode measures single-row products whose weights do not
// fit in cache (a decode step streams every weight once), with float32 and
// bf16 weights, and one that does (288×288, a projection of the model
// benchdecode runs, where the cost of handing work to the helpers shows);
// GB/s counts the weight bytes read.
func BenchmarkMatMulTDecode(b *testing.B) {
	be := cpu.New()
	for _, s := range []struct{ in, out int }{{288, 288}, {512, 8192}, {1536, 4096}, {4096, 4096}} {
		for _, dtype := range []string{"f32", "bf16"} {
			b.Run(fmt.Sprintf("in=%d,out=%d,%s", s.in, s.out, dtype), func(b *testing.B) {
				rng := newRand(1)
				x := randTensor(be, rng, 1, s.in)
				w, bytes := randTensor(be, rng, s.out, s.in), 4*s.in*s.out
				if dtype == "bf16" {
					w, bytes = be.FromHostBF16(s.out, s.in, randFloats(rng, s.out*s.in)), 2*s.in*s.out
				}
				dst := be.New(1, s.out)
				for b.Loop() {
					be.MatMulT(dst, x, w)
				}
				reportGFLOPs(b, 2*float64(s.in*s.out))
				b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkRMSNorm normalises 512 rows of Qwen3-0.6B's hidden width
// (1,024) on one goroutine: a prefill chunk's norm before each sublayer.
func BenchmarkRMSNorm(b *testing.B) {
	const rows, cols = 512, 1024
	be := cpu.NewWithWorkers(1)
	rng := newRand(1)
	x, w := randTensor(be, rng, rows, cols), randTensor(be, rng, 1, cols)
	dst := be.New(rows, cols)
	b.SetBytes(rows * cols * 4)
	for b.Loop() {
		be.RMSNorm(dst, x, w, 1e-6)
	}
}

// BenchmarkAttendDecodeLayers is one decode row's attention through every
// layer of Qwen3-0.6B (28 layers, 16 query heads and 8 KV heads of 128) at
// a 1,000-token context, each layer over its own float32 cache, as in a
// decode step: 229 MB of keys and values, too many to stay in cache from
// one step to the next. GB/s counts the keys and values read.
func BenchmarkAttendDecodeLayers(b *testing.B) {
	const layers, ctx = 28, 1000
	sh := kernels.AttnShape{NumHeads: 16, NumKVHeads: 8, HeadDim: 128, BlockSize: 16, Scale: float32(1 / math.Sqrt(128))}
	be := cpu.New()
	type layer struct {
		out, q, kc, vc kernels.Tensor
		as             []kernels.AttnSeq
	}
	ls := make([]layer, layers)
	for i := range ls {
		l := &ls[i]
		l.out, l.q, l.kc, l.vc, l.as = attnBench(be, 1, ctx, 1, sh)
	}
	for b.Loop() {
		for _, l := range ls {
			be.Attend(l.out, l.q, l.kc, l.vc, l.as, sh)
		}
	}
	bytes := float64(layers * ctx * 2 * sh.NumKVHeads * sh.HeadDim * 4)
	b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

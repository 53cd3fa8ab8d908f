//go:build cuda

package cuda

import (
	"fmt"
	"testing"

	"kvlab/kernels"
)

// Llama-3.2-1B's dimensions, the shapes the benchmarks use.
const (
	llamaHidden       = 2048
	llamaIntermediate = 8192
	llamaVocab        = 128256
	llamaHeads        = 32
	llamaKVHeads      = 8
	llamaHeadDim      = 64
)

// BenchmarkMatMulT times x·wᵀ on the projections of Llama-3.2-1B for batch
// sizes from one decode token to a long prefill chunk, and reports:
//
//	TFLOP/s   2·n·in·out per second, the compute rate (matters for large n);
//	weightGB/s  the f32 weight bytes per second (out·in·4), the rate that
//	          bounds a decode step, whose weights are read once per token.
//
// scripts/torch_gemm_bench.py times torch.matmul (cuBLAS) on the same
// shapes for comparison; run both on the same GPU.
func BenchmarkMatMulT(b *testing.B) {
	be := needGPU(b)
	shapes := []struct {
		name    string
		in, out int
	}{
		{"qo_proj", llamaHidden, llamaHidden},
		{"gate_up_proj", llamaHidden, llamaIntermediate},
		{"down_proj", llamaIntermediate, llamaHidden},
		{"lm_head", llamaHidden, llamaVocab},
	}
	rng := newRand(31)
	for _, s := range shapes {
		data := randFloats(rng, s.out*s.in, 0.02)
		// f32 weights keep the names earlier runs recorded; bf16 weights
		// (FromHostBF16, what a bf16 checkpoint loads as) add /w=bf16.
		for _, bf16 := range []bool{false, true} {
			w, suffix, wBytes := be.FromHost(s.out, s.in, data), "", 4.0
			if bf16 {
				w, suffix, wBytes = be.FromHostBF16(s.out, s.in, data), "/w=bf16", 2.0
			}
			for _, n := range []int{1, 16, 512, 2048} {
				x := be.FromHost(n, s.in, randFloats(rng, n*s.in, 1))
				dst := be.New(n, s.out)
				b.Run(fmt.Sprintf("%s/in=%d/out=%d/n=%d%s", s.name, s.in, s.out, n, suffix), func(b *testing.B) {
					be.MatMulT(dst, x, w) // warm-up
					be.Synchronize()
					b.ResetTimer()
					for range b.N {
						be.MatMulT(dst, x, w)
					}
					be.Synchronize()
					sec := b.Elapsed().Seconds()
					b.ReportMetric(2*float64(n)*float64(s.in)*float64(s.out)*float64(b.N)/sec/1e12, "TFLOP/s")
					b.ReportMetric(wBytes*float64(s.in)*float64(s.out)*float64(b.N)/sec/1e9, "weightGB/s")
				})
				be.Free(x)
				be.Free(dst)
			}
			be.Free(w)
		}
	}
}

// headShape is a model's attention heads: query heads, KV heads, head dim.
type headShape struct{ heads, kvHeads, headDim int }

// decodeBatch builds a decode step of seqs sequences with ctx tokens of
// context each in a dt cache, attention heads hs and blockSize-token
// blocks.
func decodeBatch(be *Backend, hs headShape, seqs, ctx, blockSize int, dt kernels.KVDType) (out, q, kc, vc kernels.Tensor, as []kernels.AttnSeq, sh kernels.AttnShape) {
	sh = attnShape(hs.heads, hs.kvHeads, hs.headDim, blockSize)
	perSeq := (ctx + blockSize - 1) / blockSize
	blocks := seqs * perSeq
	kvCols := hs.kvHeads * hs.headDim
	rng := newRand(32)
	// Only the page tables need to be realistic; the cache's contents do not
	// change the kernel's work, so it is filled with a constant pattern.
	kc, vc = be.NewKV(blocks*blockSize, kvCols, dt), be.NewKV(blocks*blockSize, kvCols, dt)
	perm := rng.Perm(blocks) // scattered blocks, as a long-running pool has them
	for s := range seqs {
		pages := make([]int32, perSeq)
		for i := range pages {
			pages[i] = int32(perm[s*perSeq+i])
		}
		as = append(as, kernels.AttnSeq{QStart: s, QLen: 1, CtxLen: ctx, Pages: pages})
	}
	q = be.FromHost(seqs, hs.heads*hs.headDim, randFloats(rng, seqs*hs.heads*hs.headDim, 1))
	out = be.New(seqs, hs.heads*hs.headDim)
	return out, q, kc, vc, as, sh
}

// BenchmarkAttendDecodeHeadDims is BenchmarkAttendDecode at the head shapes
// of Qwen3-0.6B (16 query / 8 KV heads of 128) and Gemma-3-1B (4 / 1 of
// 256), whose kernels (paged_attention_d128, _d256) have no launch bound,
// over float32 and bf16 caches.
func BenchmarkAttendDecodeHeadDims(b *testing.B) {
	be := needGPU(b)
	for _, m := range []struct {
		name string
		hs   headShape
	}{{"qwen3", headShape{16, 8, 128}}, {"gemma3", headShape{4, 1, 256}}} {
		for _, c := range []struct{ seqs, ctx int }{{1, 4096}, {64, 1024}, {256, 2048}} {
			for _, dt := range []kernels.KVDType{kernels.KVF32, kernels.KVBF16} {
				b.Run(fmt.Sprintf("%s/hd=%d/seqs=%d/ctx=%d/kv=%s", m.name, m.hs.headDim, c.seqs, c.ctx, dt), func(b *testing.B) {
					timeDecodeAttention(b, be, m.hs, c.seqs, c.ctx, dt)
				})
			}
		}
	}
}

// BenchmarkAttendDecode times one layer's paged decode attention and
// reports the achieved memory bandwidth: the bytes the kernel must move
// (every context token's key and value head slices, plus queries and
// outputs) divided by the time. Decode attention does two flops per byte,
// so this, compared with the GPU's peak bandwidth, is its efficiency.
func BenchmarkAttendDecode(b *testing.B) {
	be := needGPU(b)
	llama := headShape{llamaHeads, llamaKVHeads, llamaHeadDim}
	for _, c := range []struct{ seqs, ctx int }{{1, 4096}, {16, 1024}, {64, 1024}, {64, 4096}, {256, 2048}} {
		for _, dt := range kernels.KVDTypes {
			name := fmt.Sprintf("seqs=%d/ctx=%d/bs=16", c.seqs, c.ctx)
			if dt != kernels.KVF32 { // the float32 names stay as earlier runs recorded them
				name += "/kv=" + dt.String()
			}
			b.Run(name, func(b *testing.B) { timeDecodeAttention(b, be, llama, c.seqs, c.ctx, dt) })
		}
	}
}

// timeDecodeAttention times one layer's decode attention for seqs
// sequences of ctx keys in 16-token blocks, and reports GB/s: the bytes
// the kernel must move (every context token's key and value head slices
// at dt's size, plus the float32 queries and outputs) over the time.
func timeDecodeAttention(b *testing.B, be *Backend, hs headShape, seqs, ctx int, dt kernels.KVDType) {
	out, q, kc, vc, as, sh := decodeBatch(be, hs, seqs, ctx, 16, dt)
	defer func() {
		for _, t := range []kernels.Tensor{out, q, kc, vc} {
			be.Free(t)
		}
	}()
	kvBytes := float64(seqs) * float64(ctx) * float64(hs.kvHeads*hs.headDim) * float64(dt.Bytes()) * 2
	qoBytes := float64(seqs) * float64(hs.heads*hs.headDim) * 4 * 2
	be.Attend(out, q, kc, vc, as, sh) // warm-up, and uploads the page tables
	be.Synchronize()
	b.ResetTimer()
	for range b.N {
		be.Attend(out, q, kc, vc, as, sh)
	}
	be.Synchronize()
	b.ReportMetric((kvBytes+qoBytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkAttendPrefill times one layer's attention for a 512-token
// prefill chunk after a cached prefix of 0 or 1536 tokens, in TFLOP/s of
// the causal work (2 flops for q·k and 2 for p·v per visible key, head and
// dim).
func BenchmarkAttendPrefill(b *testing.B) {
	be := needGPU(b)
	const chunk, bs = 512, 16
	for _, prefix := range []int{0, 1536} {
		b.Run(fmt.Sprintf("chunk=%d/prefix=%d", chunk, prefix), func(b *testing.B) {
			ctx := prefix + chunk
			sh := attnShape(llamaHeads, llamaKVHeads, llamaHeadDim, bs)
			pages := make([]int32, (ctx+bs-1)/bs)
			for i := range pages {
				pages[i] = int32(i)
			}
			kvCols := llamaKVHeads * llamaHeadDim
			kc, vc := be.New(len(pages)*bs, kvCols), be.New(len(pages)*bs, kvCols)
			rng := newRand(33)
			q := be.FromHost(chunk, llamaHeads*llamaHeadDim, randFloats(rng, chunk*llamaHeads*llamaHeadDim, 1))
			out := be.New(chunk, llamaHeads*llamaHeadDim)
			defer func() {
				for _, t := range []kernels.Tensor{out, q, kc, vc} {
					be.Free(t)
				}
			}()
			as := []kernels.AttnSeq{{QStart: 0, QLen: chunk, CtxLen: ctx, Pages: pages}}
			var keys float64 // visible keys summed over the chunk's queries
			for i := range chunk {
				keys += float64(prefix + i + 1)
			}
			flops := 4 * keys * float64(llamaHeads*llamaHeadDim)
			be.Attend(out, q, kc, vc, as, sh)
			be.Synchronize()
			b.ResetTimer()
			for range b.N {
				be.Attend(out, q, kc, vc, as, sh)
			}
			be.Synchronize()
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
	}
}

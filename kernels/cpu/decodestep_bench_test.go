package cpu

import (
	"testing"

	"kvlab/kernels"
)

// decodeShapes are the projections of real 1B-class models in bf16, as
// bench-real writes them: q is heads × head_dim, kv one of K or V.
var decodeShapes = []struct {
	name                              string
	hidden, q, kv, ffn, vocab, layers int
}{
	{"llama3.2-1b", 2048, 2048, 512, 8192, 128256, 16},
	{"qwen3-0.6b", 1024, 2048, 1024, 3072, 151936, 28},
	{"gemma3-1b", 1152, 1024, 256, 6912, 262144, 26},
}

// decodeStep holds a model's bf16 weights (filled with small values of
// either sign, no subnormals) and a decode row's buffers; token runs the
// products of one decode token.
type decodeStep struct {
	be    *Backend
	bytes float64 // weight bytes one token reads
	token func()
}

func newDecodeStep(hidden, q, kv, ffn, vocab, layers int) *decodeStep {
	be := New()
	be.SetBF16Dot(BF16DotNative())
	st := &decodeStep{be: be}
	seed := uint16(1)
	weight := func(rows, cols int) kernels.Tensor {
		bits := make([]uint16, rows*cols)
		for i := range bits {
			seed = seed*25173 + 13849
			bits[i] = 0x3c00 | seed&0x80ff // ±2⁻⁷ to ±2⁻⁵
		}
		st.bytes += 2 * float64(rows*cols)
		return be.WrapBF16(rows, cols, bits)
	}
	row := func(n int) kernels.Tensor {
		h := make([]float32, n)
		for i := range h {
			h[i] = float32(i%7) - 3
		}
		return be.FromHost(1, n, h)
	}
	type layer struct{ q, k, v, o, gate, up, down kernels.Tensor }
	ls := make([]layer, layers)
	for i := range ls {
		ls[i] = layer{weight(q, hidden), weight(kv, hidden), weight(kv, hidden), weight(hidden, q),
			weight(ffn, hidden), weight(ffn, hidden), weight(hidden, ffn)}
	}
	head := weight(vocab, hidden)
	x, att := row(hidden), row(q)
	qo, ko, vo, o := be.New(1, q), be.New(1, kv), be.New(1, kv), be.New(1, hidden)
	g, u, d, logits := be.New(1, ffn), be.New(1, ffn), be.New(1, hidden), be.New(1, vocab)
	st.token = func() {
		for _, l := range ls {
			be.MatMulTMany(x, []kernels.Product{{Dst: qo, W: l.q}, {Dst: ko, W: l.k}, {Dst: vo, W: l.v}})
			be.MatMulT(o, att, l.o)
			be.MatMulTMany(x, []kernels.Product{{Dst: g, W: l.gate}, {Dst: u, W: l.up}})
			be.MatMulT(d, g, l.down)
		}
		be.MatMulT(logits, x, head)
	}
	return st
}

// BenchmarkDecodeStepProducts replays the products of one decode token
// (every layer's QKV, O, gate/up and down, then the LM head: 1.2–2.6 GB
// of bf16 weights, far more than any cache) with the hand-offs the
// forward pass makes and nothing else, with bf16 products on where the
// CPU has them. GB/s counts the weight bytes read: set beside a measured
// read bandwidth it shows how close the kernels come to the memory, and
// beside the engine's decode how much the rest of a step costs.
func BenchmarkDecodeStepProducts(b *testing.B) {
	for _, s := range decodeShapes {
		b.Run(s.name, func(b *testing.B) {
			st := newDecodeStep(s.hidden, s.q, s.kv, s.ffn, s.vocab, s.layers)
			for b.Loop() {
				st.token()
			}
			b.ReportMetric(st.bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

package cpu_test

import (
	"fmt"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// Example runs two tokens through a 3→2 linear layer, the way every
// projection of a transformer is computed.
func Example() {
	be := cpu.New()
	x := be.FromHost(2, 3, []float32{1, 2, 3, 4, 5, 6})       // 2 tokens × 3 features
	w := be.FromHost(2, 3, []float32{1, 0, 0, 0.5, 0.5, 0.5}) // out × in, like a HuggingFace Linear
	y := be.New(2, 2)
	be.MatMulT(y, x, w)
	fmt.Printf("%.3f\n", cpu.Data(y))
	// Output: [1.000 3.000 4.000 7.500]
}

// ExampleBackend_Attend stores a two-token prompt in block 1 of a paged
// cache and attends over it. The first token sees only itself; the second
// mixes both values, weighted by softmax(q·k).
func ExampleBackend_Attend() {
	be := cpu.New()
	shape := kernels.AttnShape{NumHeads: 1, NumKVHeads: 1, HeadDim: 2, BlockSize: 2, Scale: 1}
	k := be.FromHost(2, 2, []float32{1, 0, 0, 1})
	v := be.FromHost(2, 2, []float32{1, 2, 3, 4})
	kc, vc := be.New(4, 2), be.New(4, 2) // two blocks of two slots
	be.WriteKV(kc, vc, k, v, []int32{2, 3})

	q := be.FromHost(2, 2, []float32{1, 0, 0, 1})
	out := be.New(2, 2)
	seqs := []kernels.AttnSeq{{QStart: 0, QLen: 2, CtxLen: 2, Pages: []int32{1}}}
	be.Attend(out, q, kc, vc, seqs, shape)
	fmt.Printf("%.3f\n", cpu.Data(out))
	// Output: [1.000 2.000 2.462 3.462]
}

// ExampleBackend_SetBF16Dot multiplies the same bf16 weights by the same
// activations twice: first as float32 (the default: the weights widen
// exactly), then as bf16 products, whose activations are rounded to bf16
// (8 significant bits) first. 1.001 is not a bf16 value; it rounds to 1.
func ExampleBackend_SetBF16Dot() {
	x := []float32{1.001, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	w := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for _, dot := range []bool{false, true} {
		be := cpu.New()
		be.SetBF16Dot(dot)
		y := be.New(1, 1)
		be.MatMulT(y, be.FromHost(1, 16, x), be.FromHostBF16(1, 16, w))
		fmt.Printf("bf16 products %v: %.3f\n", dot, cpu.Data(y))
	}
	// Output:
	// bf16 products false: [136.001]
	// bf16 products true: [136.000]
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"slices"
	"testing"

	"kvlab/kernels"
)

// TestBF16Weights checks weights held as bf16 on the device
// (FromHostBF16): MatMulT with such a w gives the same bits as with the
// float32 w, for every kernel (the kernels round an f32 w to bf16 anyway),
// on whole weights and on row views; Embed from a bf16 table equals the
// CPU backend's; ToHost widens; any other operation refuses the tensor.
func TestBF16Weights(t *testing.T) {
	be := needGPU(t)
	rng := newRand(21)
	for _, c := range []struct{ n, in, out int }{
		{1, 64, 48},
		{3, 520, 24},   // float4 loads, 4 K slices
		{5, 37, 19},    // scalar loads, ragged edges
		{16, 300, 130}, // the largest skinny product
		{17, 96, 130},  // the smallest tiled one
		{70, 130, 150}, // several tiles, scalar loads
	} {
		x := randFloats(rng, c.n*c.in, 1)
		w := randFloats(rng, (c.out+2)*c.in, 1)
		xt := be.FromHost(c.n, c.in, x)
		wf, wh := be.FromHost(c.out+2, c.in, w), be.FromHostBF16(c.out+2, c.in, w)
		df, dh := be.New(c.n, c.out), be.New(c.n, c.out)
		for _, v := range []matmulVariant{matmulAuto, matmulSkinny, matmulTile64, matmulTile128} {
			if v == matmulSkinny && c.n > 16 {
				continue
			}
			t.Run(fmt.Sprintf("%dx%dx%d/%s", c.n, c.in, c.out, v), func(t *testing.T) {
				be.forceMatmul = v
				defer func() { be.forceMatmul = matmulAuto }()
				// Rows 2.. of w: a view at an offset, as the bf16 path
				// must scale by 2 bytes, not 4.
				be.MatMulT(df, xt, be.View(wf, 2, c.out))
				be.MatMulT(dh, xt, be.View(wh, 2, c.out))
				have := be.ToHost(dh, make([]float32, c.n*c.out))
				want := be.ToHost(df, make([]float32, c.n*c.out))
				if !slices.Equal(bitsOf(have), bitsOf(want)) {
					t.Fatalf("a bf16 w gives other bits than the f32 w")
				}
				checkMatMul(t, have, x, w[2*c.in:], c.n, c.in, c.out, "MatMulT, bf16 w")
			})
		}
		for _, tt := range []kernels.Tensor{xt, wf, wh, df, dh} {
			be.Free(tt)
		}
	}

	// Embed from a bf16 table, against the CPU backend's bf16 table.
	const vocab, hidden = 50, 36
	table := randFloats(rng, vocab*hidden, 2)
	ids := []int32{3, 0, 49, 3, 17}
	gt := be.FromHostBF16(vocab, hidden, table)
	defer be.Free(gt)
	ct := ref.FromHostBF16(vocab, hidden, table)
	gd, cd := be.New(len(ids), hidden), ref.New(len(ids), hidden)
	defer be.Free(gd)
	be.Embed(gd, gt, ids)
	ref.Embed(cd, ct, ids)
	requireEqual(t, be.ToHost(gd, make([]float32, len(ids)*hidden)), ref.ToHost(cd, make([]float32, len(ids)*hidden)),
		"Embed from a bf16 table")
	requireEqual(t, be.ToHost(gt, make([]float32, vocab*hidden)), ref.ToHost(ct, make([]float32, vocab*hidden)),
		"ToHost of a bf16 table")

	requirePanics(t, "Add on a bf16 weight", func() { be.Add(gt, gt) })
	sq := be.New(vocab, vocab)
	defer be.Free(sq)
	be.MatMulT(sq, be.New(vocab, hidden), gt) // shapes fit: a bf16 w is fine
	requirePanics(t, "MatMulT with a bf16 x", func() { be.MatMulT(sq, gt, gt) })
}

package cpu

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	blasgonum "gonum.org/v1/gonum/blas/gonum"

	"kvlab/kernels"
)

// blas32 is gonum's pure-Go float32 BLAS; on amd64 its dot and axpy kernels
// are SSE assembly.
var blas32 blasgonum.Implementation

// Tile sizes of MatMulT. They are constants on purpose: they decide the
// order of additions behind every output element, so they must not depend on
// the batch size. Gonum's Sgemm only runs in parallel (and changes its
// reduction order) when the call covers at least four 64×64 output blocks;
// a tile of at most 64×64 keeps every call on its serial path.
const (
	mmRowTile = 64  // rows of x per tile
	mmColTile = 64  // rows of w (output columns) per tile
	mmKBlock  = 512 // inner-dimension chunk: keeps a tile's operands in L2
)

// MatMulT computes dst = x · wᵀ. Each output element is
// Σ over fixed mmKBlock-wide chunks of the inner dimension, each chunk one
// gonum dot product, added in chunk order; nothing about that depends on how
// many rows x has or where a row sits in it.
func (b *Backend) MatMulT(dst, x, w kernels.Tensor) {
	d, xt, wt := asCPU(dst), asCPU(x), asCPU(w)
	n, in, out := xt.rows, xt.cols, wt.rows
	if wt.cols != in || d.rows != n || d.cols != out {
		panic(fmt.Sprintf("cpu: MatMulT %d×%d · (%d×%d)ᵀ into %d×%d",
			n, in, wt.rows, wt.cols, d.rows, d.cols))
	}
	if n == 0 || out == 0 {
		return
	}
	if in == 0 {
		clear(d.Data)
		return
	}
	rowTiles := (n + mmRowTile - 1) / mmRowTile
	colTiles := (out + mmColTile - 1) / mmColTile
	b.parallel(rowTiles*colTiles, func(_, job int) {
		r0 := (job / colTiles) * mmRowTile
		c0 := (job % colTiles) * mmColTile
		rows := min(mmRowTile, n-r0)
		cols := min(mmColTile, out-c0)
		matMulTile(d.Data[r0*out+c0:], out, xt.Data[r0*in:], wt.Data[c0*in:], in, rows, cols)
	})
}

// matMulTile computes a rows×cols tile of c = a · bᵀ, where a and b both have
// in columns and row stride in, and c has row stride ldc.
func matMulTile(c []float32, ldc int, a, bt []float32, in, rows, cols int) {
	beta := float32(0)
	for k0 := 0; k0 < in; k0 += mmKBlock {
		k := min(mmKBlock, in-k0)
		blas32.Sgemm(blas.NoTrans, blas.Trans, rows, cols, k,
			1, a[k0:], in, bt[k0:], in, beta, c, ldc)
		beta = 1
	}
}

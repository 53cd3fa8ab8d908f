//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"kvlab/kernels"
)

// Every method checks shapes and host metadata exactly as the CPU backend
// does, and panics with the same kind of message, before anything reaches
// the GPU: a kernel trusts its indices, and an out-of-range one would
// corrupt memory instead of failing.

// elementwiseGrid returns the block count of a grid-stride kernel over n
// elements with 256-thread blocks: enough blocks to fill the GPU, never more
// than the data needs.
func elementwiseGrid(n, limit int) int { return min((n+255)/256, limit) }

// MatMulT computes dst = x · wᵀ on tensor cores (see src/matmul.cu for the
// kernels and the precision they keep).
func (b *Backend) MatMulT(dst, x, w kernels.Tensor) {
	d, xt, wt := asCUDA(dst), asCUDA(x), asWeight(w)
	n, in, out := xt.rows, xt.cols, wt.rows
	if wt.cols != in || d.rows != n || d.cols != out {
		panic(fmt.Sprintf("cuda: MatMulT %d×%d · (%d×%d)ᵀ into %d×%d",
			n, in, wt.rows, wt.cols, d.rows, d.cols))
	}
	if n == 0 || out == 0 {
		return
	}
	defer b.enter()()
	if in == 0 {
		b.zero(d)
		return
	}
	cps := matmulChunksPerSlice(in, out)
	chunks := (in + matmulChunk - 1) / matmulChunk
	slices := (chunks + cps - 1) / cps
	// The seven arguments every matmul kernel takes, spelled out at each
	// launch: a slice built here and appended to would be allocated on
	// every call.
	dp, xp, wp, na, ia, oa, ca := ptrArg(d), ptrArg(xt), ptrArg(wt), intArg(n), intArg(in), intArg(out), intArg(cps)
	k128, k64, ksk := b.fn.matmul128, b.fn.matmul64, b.fn.matmulSkinny
	if wt.bf16 {
		k128, k64, ksk = b.fn.matmulW128, b.fn.matmulW64, b.fn.matmulWSk
	}
	switch b.matmulKernel(n, out) {
	case matmulSkinny:
		jobs := (out + 15) / 16 * slices // one warp per 16-column tile and K slice
		var part devPtr
		if slices > 1 {
			part = b.meta[roleSlices].scratch("MatMulT", int64(4*slices*n*out))
		}
		b.launch("MatMulT", ksk, (jobs+skinnyWarps-1)/skinnyWarps, 1, 32*skinnyWarps,
			dp, xp, wp, na, ia, oa, ca, devArg(part))
		if slices > 1 {
			b.launch("MatMulT", b.fn.matmulSumSlices, elementwiseGrid(n*out, 1024), 1, 256,
				ptrArg(d), devArg(part), intArg(n*out), intArg(slices))
		}
	case matmulTile128:
		b.launch("MatMulT", k128, (out+127)/128, (n+127)/128, 256, dp, xp, wp, na, ia, oa, ca)
	default:
		b.launch("MatMulT", k64, (out+127)/128, (n+63)/64, 256, dp, xp, wp, na, ia, oa, ca)
	}
}

// matmulChunk is MM_BK in src/matmul.cu: the K step of every matmul kernel, and
// skinnyWarps is SK_WARPS, the warps of a skinny block.
const (
	matmulChunk = 32
	skinnyWarps = 4
)

// matmulChunksPerSlice fixes the reduction order of every element of an
// in→out product, whichever kernel runs: K is cut into 32-wide chunks, the
// chunks into slices of this many; each slice is summed in 16-wide MMA
// steps in K order starting from zero, and the slices' sums are added in
// slice order. It depends on in and out only, never on the number of rows,
// so a row's result is the same bits at every batch size.
//
// The number of slices is a split of K for small decode products, whose
// 16-column tiles alone would give the GPU too few warps to keep its
// memory busy (a k/v projection of Llama-3.2-1B has 32): the skinny kernel
// runs one warp per tile and slice, and matmul_sum_slices adds the slices.
// It is the smallest power of two that gives at least splitTargetJobs warps,
// at most 16, and leaves at least 4 chunks (128 columns of K) per slice.
// The tiled kernels, which have rows enough to fill the GPU, follow the
// same order by adding each slice's result to dst as the slice ends.
func matmulChunksPerSlice(in, out int) int {
	chunks := max(1, (in+matmulChunk-1)/matmulChunk)
	tiles := (out + 15) / 16
	slices := 1
	for slices < 16 && tiles*slices < splitTargetJobs && chunks/(2*slices) >= 4 {
		slices *= 2
	}
	return (chunks + slices - 1) / slices
}

// splitTargetJobs is the number of skinny warps a split aims at: eight
// 4-warp blocks for each of an H100's 132 SMs, rounded. It is a constant,
// not the SM count of the device at hand, so that the emulator and every
// GPU sum in the same order.
const splitTargetJobs = 1024

// matmulVariant names one of matmul.cu's kernels.
type matmulVariant int

const (
	matmulAuto   matmulVariant = iota // pick by shape (the default)
	matmulSkinny                      // n <= 16 only
	matmulTile64
	matmulTile128
)

// matmulKernel picks the kernel for an n-row product with out columns,
// unless a test or benchmark has forced one.
func (b *Backend) matmulKernel(n, out int) matmulVariant {
	switch {
	case b.forceMatmul != matmulAuto && (b.forceMatmul != matmulSkinny || n <= 16):
		return b.forceMatmul
	case n <= 16:
		return matmulSkinny
	case ((n+127)/128)*((out+127)/128) >= 2*b.sms:
		return matmulTile128
	default:
		// 128-row tiles would leave SMs idle; 64-row tiles double the grid.
		return matmulTile64
	}
}

// zero clears t; the caller holds the lock.
func (b *Backend) zero(t *Tensor) {
	if n := t.elems(); n > 0 {
		check("zero", memsetZero(t))
	}
}

// Add computes dst += x element-wise.
func (b *Backend) Add(dst, x kernels.Tensor) {
	d, s := asCUDA(dst), asCUDA(x)
	sameShape("Add", d, s)
	n := d.elems()
	defer b.enter()()
	b.launch("Add", b.fn.add, elementwiseGrid(n, 4096), 1, 256, ptrArg(d), ptrArg(s), intArg(n))
}

// SiLUMul computes dst = silu(gate) * up element-wise.
func (b *Backend) SiLUMul(dst, gate, up kernels.Tensor) {
	d, g, u := asCUDA(dst), asCUDA(gate), asCUDA(up)
	sameShape("SiLUMul", d, g)
	sameShape("SiLUMul", d, u)
	n := d.elems()
	defer b.enter()()
	b.launch("SiLUMul", b.fn.siluMul, elementwiseGrid(n, 4096), 1, 256, ptrArg(d), ptrArg(g), ptrArg(u), intArg(n))
}

// RMSNorm normalises each row of x into dst (which may be x).
func (b *Backend) RMSNorm(dst, x, weight kernels.Tensor, eps float32) {
	d, s, w := asCUDA(dst), asCUDA(x), asCUDA(weight)
	sameShape("RMSNorm", d, s)
	if w.rows != 1 || w.cols != s.cols {
		panic(fmt.Sprintf("cuda: RMSNorm weight is %d×%d for %d columns", w.rows, w.cols, s.cols))
	}
	if s.cols == 0 {
		return
	}
	defer b.enter()()
	b.launch("RMSNorm", b.fn.rmsnorm, s.rows, 1, 256, ptrArg(d), ptrArg(s), ptrArg(w), intArg(s.cols), floatArg(eps))
}

// RMSNormHeads applies RMSNorm in place to every headDim-wide slice of
// every row of x.
func (b *Backend) RMSNormHeads(x, weight kernels.Tensor, headDim int, eps float32) {
	s, w := asCUDA(x), asCUDA(weight)
	if headDim <= 0 || s.cols%headDim != 0 || w.rows != 1 || w.cols != headDim {
		panic(fmt.Sprintf("cuda: RMSNormHeads of %d columns with head %d and weight %d×%d",
			s.cols, headDim, w.rows, w.cols))
	}
	slices := s.elems() / headDim
	defer b.enter()()
	b.launch("RMSNormHeads", b.fn.rmsnormHeads, (slices+7)/8, 1, 256,
		ptrArg(s), ptrArg(w), intArg(slices), intArg(headDim), floatArg(eps))
}

// RoPE rotates x in place (rotate_half pairing, row r at position pos[r]).
func (b *Backend) RoPE(x kernels.Tensor, pos []int32, headDim int, invFreq []float32) {
	s := asCUDA(x)
	half := headDim / 2
	if headDim <= 0 || headDim%2 != 0 || s.cols%headDim != 0 || len(invFreq) != half || len(pos) != s.rows {
		panic(fmt.Sprintf("cuda: RoPE of %d×%d with head %d, %d frequencies and %d positions",
			s.rows, s.cols, headDim, len(invFreq), len(pos)))
	}
	if s.rows == 0 || s.cols == 0 {
		return
	}
	defer b.enter()()
	pp := b.upload(rolePos, "RoPE", int32Bytes(pos))
	fp := b.upload(roleFreq, "RoPE", float32Bytes(invFreq))
	block := min(128, (half+31)/32*32)
	b.launch("RoPE", b.fn.rope, s.rows, 1, block, ptrArg(s), devArg(pp), devArg(fp), intArg(s.cols), intArg(headDim))
}

// Embed copies table row ids[r] into dst row r.
func (b *Backend) Embed(dst, table kernels.Tensor, ids []int32) {
	b.gather("Embed", asCUDA(dst), asWeight(table), ids)
}

// GatherRows copies src row rows[r] into dst row r.
func (b *Backend) GatherRows(dst, src kernels.Tensor, rows []int32) {
	b.gather("GatherRows", asCUDA(dst), asCUDA(src), rows)
}

func (b *Backend) gather(op string, d, s *Tensor, idx []int32) {
	if d.cols != s.cols || d.rows != len(idx) {
		panic(fmt.Sprintf("cuda: %s of %d rows from %d×%d into %d×%d", op, len(idx), s.rows, s.cols, d.rows, d.cols))
	}
	for _, i := range idx {
		if i < 0 || int(i) >= s.rows {
			panic(fmt.Sprintf("cuda: %s: row %d out of %d", op, i, s.rows))
		}
	}
	if len(idx) == 0 || d.cols == 0 {
		return
	}
	defer b.enter()()
	ip := b.upload(roleRows, op, int32Bytes(idx))
	fn := b.fn.gatherRows
	if s.bf16 {
		fn = b.fn.gatherRowsBF16
	}
	b.launch(op, fn, len(idx), 1, 256, ptrArg(d), ptrArg(s), devArg(ip), intArg(d.cols))
}

// WriteKV stores row r of k and v into row slots[r] of kc and vc, skipping
// rows whose slot is negative.
func (b *Backend) WriteKV(kc, vc, k, v kernels.Tensor, slots []int32) {
	kct, vct, dt := asKV("WriteKV", kc, vc)
	kt, vt := asCUDA(k), asCUDA(v)
	sameShape("WriteKV", kct, vct)
	sameShape("WriteKV", kt, vt)
	if kt.cols != kct.cols || kt.rows != len(slots) {
		panic(fmt.Sprintf("cuda: WriteKV of %d slots from %d×%d into %d×%d",
			len(slots), kt.rows, kt.cols, kct.rows, kct.cols))
	}
	for _, s := range slots {
		if int(s) >= kct.rows {
			panic(fmt.Sprintf("cuda: WriteKV: slot %d out of %d", s, kct.rows))
		}
	}
	if len(slots) == 0 || kt.cols == 0 {
		return
	}
	defer b.enter()()
	sp := b.upload(roleSlots, "WriteKV", int32Bytes(slots))
	fn := b.fn.writeKV
	switch dt {
	case kernels.KVBF16:
		fn = b.fn.writeKVBF16
	case kernels.KVF16:
		fn = b.fn.writeKVF16
	}
	b.launch("WriteKV", fn, len(slots), 1, 256,
		ptrArg(kct), ptrArg(vct), ptrArg(kt), ptrArg(vt), devArg(sp), intArg(kt.cols))
}

// CopyBlock copies block src to block dst in both caches.
func (b *Backend) CopyBlock(kc, vc kernels.Tensor, src, dst int32, blockSize int) {
	kct, vct, dt := asKV("CopyBlock", kc, vc)
	if err := kernels.CheckCopyBlock(kc, vc, src, dst, blockSize); err != nil {
		panic(fmt.Sprintf("cuda: CopyBlock: %v", err))
	}
	n := blockSize * kct.cols
	fn := b.fn.copyBlock
	if dt != kernels.KVF32 {
		fn = b.fn.copyBlock16
	}
	defer b.enter()()
	b.launch("CopyBlock", fn, elementwiseGrid(n, 1024), 1, 256,
		ptrArg(kct), ptrArg(vct), intArg(int(src)*n), intArg(int(dst)*n), intArg(n))
}

// SoftmaxRows replaces every row of x by its softmax, in place.
func (b *Backend) SoftmaxRows(x kernels.Tensor) {
	s := asCUDA(x)
	if s.cols == 0 {
		return
	}
	defer b.enter()()
	b.launch("SoftmaxRows", b.fn.softmax, s.rows, 1, 512, ptrArg(s), intArg(s.cols))
}

// ArgmaxRows returns the column of each row's largest value (the smallest
// such column on ties, NaNs skipped). It waits for the GPU.
func (b *Backend) ArgmaxRows(x kernels.Tensor) []int32 {
	s := asCUDA(x)
	res := make([]int32, s.rows)
	if s.rows == 0 || s.cols == 0 {
		return res
	}
	defer b.enter()()
	m := &b.meta[roleArgmax]
	m.reserve("ArgmaxRows", int64(4*s.rows))
	b.launch("ArgmaxRows", b.fn.argmax, s.rows, 1, 256, devArg(m.ptr), ptrArg(s), intArg(s.cols))
	check("ArgmaxRows", copyToHost(res, m.ptr))
	b.stage.idle()
	return res
}

package cpu

import (
	"fmt"
	"math"

	"kvlab/kernels"
)

// parallelElems is the element count above which element-wise operations
// split their rows across goroutines; below it, starting goroutines costs
// more than it saves.
const parallelElems = 1 << 16

// Add computes dst += x element-wise.
func (b *Backend) Add(dst, x kernels.Tensor) {
	d, s := asCPU(dst), asCPU(x)
	sameShape("Add", d, s)
	b.rowChunks(d, func(lo, hi int) {
		dd, sd := d.Data[lo:hi], s.Data[lo:hi]
		for i, v := range sd {
			dd[i] += v
		}
	})
}

// RMSNorm normalises each row of x into dst. The sum of squares is
// accumulated in float64 and rounded once, so the mean is as close to exact
// as float32 can hold; HuggingFace reduces in float32 with a blocked order
// this package could not reproduce bit for bit anyway. The scaling follows
// HuggingFace's order: (x · rsqrt(mean+eps)) · weight, all in float32.
func (b *Backend) RMSNorm(dst, x, weight kernels.Tensor, eps float32) {
	d, s, w := asCPU(dst), asCPU(x), asCPU(weight)
	sameShape("RMSNorm", d, s)
	if w.rows != 1 || w.cols != s.cols {
		panic(fmt.Sprintf("cpu: RMSNorm weight is %d×%d for %d columns", w.rows, w.cols, s.cols))
	}
	b.rowRanges(d, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			rmsNorm(d.Row(r), s.Row(r), w.Data, eps)
		}
	})
}

// RMSNormHeads applies RMSNorm in place to every headDim-wide slice of every
// row of x (Qwen3's per-head q/k norm).
func (b *Backend) RMSNormHeads(x, weight kernels.Tensor, headDim int, eps float32) {
	s, w := asCPU(x), asCPU(weight)
	if headDim <= 0 || s.cols%headDim != 0 || w.rows != 1 || w.cols != headDim {
		panic(fmt.Sprintf("cpu: RMSNormHeads of %d columns with head %d and weight %d×%d",
			s.cols, headDim, w.rows, w.cols))
	}
	b.rowChunks(s, func(lo, hi int) {
		for i := lo; i < hi; i += headDim {
			h := s.Data[i : i+headDim]
			rmsNorm(h, h, w.Data, eps)
		}
	})
}

// rmsNorm normalises x into dst (which may be x): dst[i] =
// w[i]·(x[i]·inv), inv = 1/√(mean of x² + eps), with the sum of squares
// in float64 in sumSquaresGo's order and each product rounded to float32;
// the CPU's kernels (kern.sumSquares, kern.normScale) give those bits.
func rmsNorm(dst, x, w []float32, eps float32) {
	mean := float32(kern.sumSquares(x) / float64(len(x)))
	inv := float32(1 / math.Sqrt(float64(mean+eps)))
	kern.normScale(dst[:len(x)], x, w[:len(x)], inv)
}

// sumSquaresGo returns the sum of x[i]² in float64, in dot.go's order:
// eight lane sums (element i into lane i mod 8 while a whole group of
// eight remains), the fixed tree, then the last len(x) mod 8 in order.
// The square of a float32 is exact in float64, so each addition is the
// only rounding and the order alone decides the bits, on every machine
// (Go fusing a multiply-add changes nothing). One running sum would make
// every addition wait on the one before; eight lanes let them overlap, and
// let a vector kernel (sumSquaresAVX2) give the same bits.
func sumSquaresGo(x []float32) float64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		g := x[i : i+8 : i+8]
		s0 += float64(g[0]) * float64(g[0])
		s1 += float64(g[1]) * float64(g[1])
		s2 += float64(g[2]) * float64(g[2])
		s3 += float64(g[3]) * float64(g[3])
		s4 += float64(g[4]) * float64(g[4])
		s5 += float64(g[5]) * float64(g[5])
		s6 += float64(g[6]) * float64(g[6])
		s7 += float64(g[7]) * float64(g[7])
	}
	return sumSquaresTail(((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)), x[i:])
}

// sumSquaresTail adds the squares of tail, in order, to s.
func sumSquaresTail(s float64, tail []float32) float64 {
	for _, v := range tail {
		s += float64(v) * float64(v)
	}
	return s
}

// normScaleGo sets dst[i] = w[i]·(x[i]·s), each product rounded to
// float32.
func normScaleGo(dst, x, w []float32, s float32) {
	for i, v := range x {
		dst[i] = w[i] * (v * s)
	}
}

// RoPE rotates x in place using HuggingFace's rotate_half pairing: element i
// of a head pairs with element i+headDim/2. The angle is pos·invFreq[i]
// rounded to float32, as HuggingFace computes it in float32 before taking
// cos and sin; cos and sin are then evaluated in float64 and rounded, which
// is within an ulp of PyTorch's float32 versions.
//
// A forward pass rotates q and k of every layer at the same positions, and
// most models use one set of frequencies in every layer, so the cos and sin
// of a call are kept (ropeTables) and the next call with the same
// positions and frequencies reuses them instead of evaluating them again.
func (b *Backend) RoPE(x kernels.Tensor, pos []int32, headDim int, invFreq []float32) {
	s := asCPU(x)
	half := headDim / 2
	if headDim <= 0 || headDim%2 != 0 || s.cols%headDim != 0 || len(invFreq) != half || len(pos) != s.rows {
		panic(fmt.Sprintf("cpu: RoPE of %d×%d with head %d, %d frequencies and %d positions",
			s.rows, s.cols, headDim, len(invFreq), len(pos)))
	}
	t := b.ropes.find(pos, invFreq)
	if t == nil {
		t = newRopeTable(pos, invFreq)
		b.rowRanges(s, func(r0, r1 int) {
			t.fill(r0, r1)
			rope(s, t, r0, r1, headDim)
		})
		b.ropes.add(t)
		return
	}
	b.rowRanges(s, func(r0, r1 int) { rope(s, t, r0, r1, headDim) })
}

// rope rotates rows [r0, r1) of x by the angles of t (RoPE).
func rope(s *Tensor, t *ropeTable, r0, r1, headDim int) {
	for r := r0; r < r1; r++ {
		kern.rope(s.Row(r), t.row(r), headDim)
	}
}

// ropeGo rotates every head of row by cs: the cos of each pair's angle in
// cs[:headDim/2], its sin in cs[headDim/2:].
func ropeGo(row, cs []float32, headDim int) {
	half := headDim / 2
	cos, sin := cs[:half], cs[half:headDim]
	for h := 0; h < len(row); h += headDim {
		lo, hi := row[h:h+half], row[h+half:h+headDim]
		for i := range lo {
			// Each product rounded on its own: Go may fuse a*b-c*d
			// into a fused multiply-add (it does on arm64), and the
			// conversions forbid it, so every architecture and
			// kernel set gives the same bits.
			a, c := lo[i], hi[i]
			lo[i] = float32(a*cos[i]) - float32(c*sin[i])
			hi[i] = float32(c*cos[i]) + float32(a*sin[i])
		}
	}
}

// SiLUMul computes dst = silu(gate) * up with silu(g) = g·σ(g), the
// logistic σ from the float32 exponential attention uses (siluMulGo in
// exp.go, within a few ulp of PyTorch's g / (1 + e^-g)). Large inputs are split by rows across goroutines; each
// element is computed independently, so the split changes nothing.
func (b *Backend) SiLUMul(dst, gate, up kernels.Tensor) {
	d, g, u := asCPU(dst), asCPU(gate), asCPU(up)
	sameShape("SiLUMul", d, g)
	sameShape("SiLUMul", d, u)
	b.rowChunks(d, func(lo, hi int) {
		kern.siluMul(d.Data[lo:hi], g.Data[lo:hi], u.Data[lo:hi])
	})
}

// rowRanges calls body on ranges [r0, r1) of t's rows, in parallel when t
// is large (rowChunks).
func (b *Backend) rowRanges(t *Tensor, body func(r0, r1 int)) {
	if t.cols == 0 {
		body(0, t.rows)
		return
	}
	b.rowChunks(t, func(lo, hi int) { body(lo/t.cols, hi/t.cols) })
}

// rowChunks calls body on ranges of t's flat data that cover whole rows,
// in parallel when t is large. Every row is computed on its own, so the
// split changes no result; RMSNorm, RoPE and Add use it so that a prefill
// chunk's element-wise work between the products runs on every core.
func (b *Backend) rowChunks(t *Tensor, body func(lo, hi int)) {
	n := len(t.Data)
	if n < parallelElems || b.workers == 1 || t.rows < 2 {
		body(0, n)
		return
	}
	chunks := min(t.rows, 4*b.workers)
	b.parallel(chunks, func(_, c int) {
		r0, r1 := c*t.rows/chunks, (c+1)*t.rows/chunks
		body(r0*t.cols, r1*t.cols)
	})
}

// Embed copies table row ids[r] into dst row r.
func (b *Backend) Embed(dst, table kernels.Tensor, ids []int32) {
	d, t := asCPU(dst), asWeight(table)
	if t.bf16 == nil {
		gatherRows("Embed", d, t, ids)
		return
	}
	if d.cols != t.cols || d.rows != len(ids) {
		panic(fmt.Sprintf("cpu: Embed of %d rows from %d×%d into %d×%d", len(ids), t.rows, t.cols, d.rows, d.cols))
	}
	for r, i := range ids {
		if i < 0 || int(i) >= t.rows {
			panic(fmt.Sprintf("cpu: Embed: row %d out of %d", i, t.rows))
		}
		src, dr := t.bf16[int(i)*t.cols:(int(i)+1)*t.cols], d.Row(r)
		for j, h := range src {
			dr[j] = widen(h)
		}
	}
}

// GatherRows copies src row rows[r] into dst row r.
func (b *Backend) GatherRows(dst, src kernels.Tensor, rows []int32) {
	gatherRows("GatherRows", asCPU(dst), asCPU(src), rows)
}

func gatherRows(op string, d, s *Tensor, idx []int32) {
	if d.cols != s.cols || d.rows != len(idx) {
		panic(fmt.Sprintf("cpu: %s of %d rows from %d×%d into %d×%d", op, len(idx), s.rows, s.cols, d.rows, d.cols))
	}
	for r, i := range idx {
		if i < 0 || int(i) >= s.rows {
			panic(fmt.Sprintf("cpu: %s: row %d out of %d", op, i, s.rows))
		}
		copy(d.Row(r), s.Row(int(i)))
	}
}

// WriteKV stores row r of k and v into row slots[r] of kc and vc. Into a
// 16-bit cache it rounds each value, and leaves k and v holding the
// rounded values (see kernels.Backend.WriteKV).
func (b *Backend) WriteKV(kc, vc, k, v kernels.Tensor, slots []int32) {
	kct, vct, dt := kvCaches("WriteKV", kc, vc)
	kt, vt := asCPU(k), asCPU(v)
	sameShape("WriteKV", kct, vct)
	sameShape("WriteKV", kt, vt)
	if kt.cols != kct.cols || kt.rows != len(slots) {
		panic(fmt.Sprintf("cpu: WriteKV of %d slots from %d×%d into %d×%d",
			len(slots), kt.rows, kt.cols, kct.rows, kct.cols))
	}
	for _, s := range slots {
		if int(s) >= kct.rows {
			panic(fmt.Sprintf("cpu: WriteKV: slot %d out of %d", s, kct.rows))
		}
	}
	// A negative slot's KV is already cached (see kernels.Backend.WriteKV).
	if dt != kernels.KVF32 {
		for r, s := range slots {
			if s < 0 {
				roundKV(kt.Row(r), dt)
				roundKV(vt.Row(r), dt)
				continue
			}
			narrowKV(kct.kvRow(int(s)), kt.Row(r), dt)
			narrowKV(vct.kvRow(int(s)), vt.Row(r), dt)
		}
		return
	}
	for r, s := range slots {
		if s >= 0 {
			copy(kct.Row(int(s)), kt.Row(r))
			copy(vct.Row(int(s)), vt.Row(r))
		}
	}
}

// CopyBlock copies block src to block dst in both caches.
func (b *Backend) CopyBlock(kc, vc kernels.Tensor, src, dst int32, blockSize int) {
	kct, vct, dt := kvCaches("CopyBlock", kc, vc)
	if err := kernels.CheckCopyBlock(kc, vc, src, dst, blockSize); err != nil {
		panic(fmt.Sprintf("cpu: CopyBlock: %v", err))
	}
	n := blockSize * kct.cols
	so, do := int(src)*n, int(dst)*n
	if dt != kernels.KVF32 {
		copy(kct.kv16[do:do+n], kct.kv16[so:so+n])
		copy(vct.kv16[do:do+n], vct.kv16[so:so+n])
		return
	}
	copy(kct.Data[do:do+n], kct.Data[so:so+n])
	copy(vct.Data[do:do+n], vct.Data[so:so+n])
}

// SoftmaxRows replaces every row of x by its softmax. The maximum is
// subtracted first so that exp cannot overflow, and the normaliser is summed
// in float64 because vocabulary rows are long (over 100k entries) and a
// float32 running sum would lose the small tail probabilities.
func (b *Backend) SoftmaxRows(x kernels.Tensor) {
	s := asCPU(x)
	for r := range s.rows {
		row := s.Row(r)
		if len(row) == 0 {
			continue
		}
		m := row[0]
		for _, v := range row[1:] {
			m = max(m, v)
		}
		var sum float64
		for i, v := range row {
			e := math.Exp(float64(v - m))
			row[i] = float32(e)
			sum += e
		}
		for i, v := range row {
			row[i] = float32(float64(v) / sum)
		}
	}
}

// ArgmaxRows returns the column of each row's largest value, the smallest
// such column on ties, so that greedy decoding is reproducible. NaNs are
// never chosen unless the row holds nothing else.
func (b *Backend) ArgmaxRows(x kernels.Tensor) []int32 {
	s := asCPU(x)
	res := make([]int32, s.rows)
	for r := range s.rows {
		row := s.Row(r)
		best := -1
		for i, v := range row {
			if v != v { // NaN
				continue
			}
			if best < 0 || v > row[best] {
				best = i
			}
		}
		res[r] = int32(max(best, 0))
	}
	return res
}

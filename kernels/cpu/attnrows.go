package cpu

// attnRows is how many query rows of a prefill chunk attention takes at
// once: the height of MatMulT's widest tile (dots6x8).
const attnRows = 6

// attendRows computes query heads [h0, h1) of the n ≤ attnRows query rows
// row0, row0+1, ... of q into the same rows of out. Row r sees the keys
// j0[r]..j1[r]-1, as for attendRow.
//
// Each row gets exactly attendRow's arithmetic; what changes is the order
// in which rows and blocks are visited, which no row's result depends on.
// The key blocks that every row sees whole are done for all rows at once:
// their scores are a small matrix product (n query rows against the
// block's keys, MatMulT's tiles when eight keys sit in consecutive cache
// rows), and each value row is read once for all n accumulators
// (axpyRows6). Blocks that only some rows see (the diagonal of the causal
// mask, the edge of a window) are done row by row before and after.
func attendRows[E float32 | uint16](kk *kvKern[E], out, q *Tensor, row0, n int, k, v []E, ld int, kr keyRows, j0, j1 *[attnRows]int, h0, h1, group, hd int, scale, limit float32, sc *attnScratch) {
	// The shared blocks: [s0, s1), both multiples of attnBlock.
	s0, s1 := 0, j1[0]
	for r := range n {
		s0 = max(s0, (j0[r]+attnBlock-1)/attnBlock*attnBlock)
		s1 = min(s1, j1[r]/attnBlock*attnBlock)
	}
	if s0 >= s1 {
		for r := range n {
			attendRow(kk, out.Row(row0+r), q.Row(row0+r), k, v, ld, kr, j0[r], j1[r], h0, h1, group, hd, scale, limit, false, sc)
		}
		return
	}

	nh := h1 - h0
	var sts [attnRows]rowState
	for r := range n {
		sts[r] = sc.state(r, nh, hd)
		attendSpan(kk, &sts[r], q.Row(row0+r), k, v, ld, kr, j0[r], s0, h0, group, hd, scale, limit, false, sc)
	}
	ks := &kern
	rows := sc.rows[0][:]
	for b0 := s0; b0 < s1; b0 += attnBlock {
		kr.fill(rows, b0)
		for i := range nh {
			at := ((h0 + i) / group) * hd
			scoresRows(kk, sc.scores[:], n, q.Data[row0*q.cols+(h0+i)*hd:], q.cols, k, at, rows, ld, hd)
			for r := range n {
				sts[r].softmaxStep(ks, i, sc.scores[r*attnBlock:(r+1)*attnBlock], scale, limit, hd)
			}
			accumulateRows(kk, sts[:n], i, sc.scores[:], v, at, rows, ld, hd)
		}
	}
	for r := range n {
		attendSpan(kk, &sts[r], q.Row(row0+r), k, v, ld, kr, s1, j1[r], h0, group, hd, scale, limit, false, sc)
		sts[r].finish(out.Row(row0+r), h0, hd)
	}
}

// scoresRows sets dst[r*attnBlock+t] = dot(x[r*ldx:], k[rows[t]*ld+off:])
// (hd long) for r < n and t < attnBlock, each a whole dot product in the
// order of dot.go. Eight keys in consecutive cache rows (a page of eight or
// more holds them) form an n×8 product that MatMulT's tiles compute
// (where kk has tiles); otherwise each row takes its eight keys with
// dotsRows8.
func scoresRows[E float32 | uint16](kk *kvKern[E], dst []float32, n int, x []float32, ldx int, k []E, off int, rows []int32, ld, hd int) {
	nb := hd / 8
	f := kk.tiles
	for t := 0; t < attnBlock; t += 8 {
		d := dst[t:]
		if f == nil || !consecutive(rows[t:t+8]) {
			for r := range n {
				kk.dotsRows8(x[r*ldx:], k, off, rows[t:t+8], ld, nb, d[r*attnBlock:])
			}
			continue
		}
		w := k[int(rows[t])*ld+off:]
		r := 0
		if f.dots6x8 != nil {
			r = matMulTiles(f, f.dots6x8, 6, 8, d, attnBlock, x, ldx, w, ld, nb, r, n, 0, 8)
		}
		r = matMulTiles(f, f.dots3x4, 3, 4, d, attnBlock, x, ldx, w, ld, nb, r, n, 0, 8)
		for ; r < n; r++ {
			f.dots1x8(x[r*ldx:], w, ld, nb, d[r*attnBlock:])
		}
	}
	if hd%8 != 0 {
		for r := range n {
			for t, kr := range rows[:attnBlock] {
				at := int(kr)*ld + off
				dst[r*attnBlock+t] = kk.dotTail(dst[r*attnBlock+t], x[r*ldx:r*ldx+hd], k[at:at+hd], 8*nb)
			}
		}
	}
}

// consecutive reports whether rows are consecutive cache rows.
func consecutive(rows []int32) bool {
	for t := 1; t < len(rows); t++ {
		if rows[t] != rows[0]+int32(t) {
			return false
		}
	}
	return true
}

// accumulateRows adds, for every row r of sts, p_r[t]·v[rows[t]*ld+off:]
// (hd long) to the accumulator of head i, in key order, where p_r is row
// r's block of weights in p (attnBlock apart). A full set of attnRows
// rows goes through axpyRows6 where the kernel set has it, in widths of
// 64, 32 and 16 columns; the rest row by row (accumulateRow). Each
// element is the same chain of fused multiply-adds either way.
func accumulateRows[E float32 | uint16](kk *kvKern[E], sts []rowState, i int, p []float32, v []E, off int, rows []int32, ld, hd int) {
	d := 0
	if len(sts) == attnRows && kk.axpyRows6 != nil {
		acc := sts[0].head(i, hd)
		step := len(sts[0].acc) // one row's state to the next: they sit back to back
		acc = acc[:cap(acc)]
		for _, w := range [...]int{64, 32, 16} {
			for ; d+w <= hd; d += w {
				kk.axpyRows6(acc[d:], step, p, v, off+d, rows, ld, w)
			}
		}
	}
	if d < hd {
		for r := range sts {
			accumulateRowKV(kk, sts[r].head(i, hd)[d:], p[r*attnBlock:], v, off+d, rows, ld, hd-d)
		}
	}
}

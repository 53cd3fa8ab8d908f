package cpu

import (
	"fmt"
	"math"

	"kvlab/kernels"
)

// attnBlock is how many key positions attention handles at a time. Blocks
// are aligned to the key's index in the sequence's table of visible keys
// (its position, for Attend; its place in the chunk, for AttendLocal), not
// to the query, the chunk or the page size, so a query's result depends
// only on its position and the keys it sees: never on how its prompt was
// chunked, batched or laid out in pages.
const attnBlock = 64

// attnQuery names n consecutive query rows of an attention call, from row
// i of sequence seq.
type attnQuery struct{ seq, i, n int32 }

// attnScratch is one worker's scratch space, sized for one block of keys.
type attnScratch struct {
	acc    []float32                     // per row and head: an aligned headStride-wide slot
	scores [attnRows * attnBlock]float32 // per row: one block's scores
	rows   [2][attnBlock]int32           // this block's key rows and the next's
	maxes  []float32                     // per row and head: the largest score so far
	sums   []float32                     // per row and head: the softmax denominator so far
}

// attnCall is the per-call bookkeeping of an attention operation, pooled so
// that a decode step does not allocate.
type attnCall struct {
	queries []attnQuery
	scratch []attnScratch // per worker
	// The kernels of the call, for a float32 or a 16-bit cache: kept
	// here so that handing them to the workers allocates nothing.
	k32 kvKern[float32]
	k16 kvKern[uint16]
}

// Attend computes causal attention, reading keys and values through each
// sequence's page table.
// A 16-bit cache (NewKV) is widened as its keys and values are loaded.
func (b *Backend) Attend(out, q, kc, vc kernels.Tensor, seqs []kernels.AttnSeq, shape kernels.AttnShape) {
	k, v, dt := kvCaches("Attend", kc, vc)
	call := b.attnCall()
	defer b.attn.Put(call)
	if dt == kernels.KVF32 {
		call.k32 = kvKernF32(&kern)
		attend(b, call, "Attend", asCPU(out), asCPU(q), k, v, k.Data, v.Data, &call.k32, seqs, shape, false)
		return
	}
	call.k16 = kvKern16(&kern, dt)
	attend(b, call, "Attend", asCPU(out), asCPU(q), k, v, k.kv16, v.kv16, &call.k16, seqs, shape, false)
}

// AttendLocal computes causal attention within each sequence's own chunk,
// reading keys and values from this step's k and v rows. It runs the very
// same per-query arithmetic as Attend, so when a chunk is a whole prompt
// (CtxLen == QLen) the two agree bit for bit.
func (b *Backend) AttendLocal(out, q, k, v kernels.Tensor, seqs []kernels.AttnSeq, shape kernels.AttnShape) {
	kt, vt := asCPU(k), asCPU(v)
	call := b.attnCall()
	defer b.attn.Put(call)
	call.k32 = kvKernF32(&kern)
	attend(b, call, "AttendLocal", asCPU(out), asCPU(q), kt, vt, kt.Data, vt.Data, &call.k32, seqs, shape, true)
}

// attnCall returns a pooled attnCall; the caller puts it back.
func (b *Backend) attnCall() *attnCall {
	call, _ := b.attn.Get().(*attnCall)
	if call == nil {
		call = new(attnCall)
	}
	return call
}

// attend is the driver shared by Attend and AttendLocal, over keys kd and
// values vd (the data of k and v) of element type E through the kernels
// kk. The only difference between Attend and AttendLocal is how a key's
// index maps to a row of k and v (keyRows); everything after that is
// common, so they cannot drift apart numerically.
func attend[E float32 | uint16](b *Backend, call *attnCall, op string, out, q, k, v *Tensor, kd, vd []E, kk *kvKern[E], seqs []kernels.AttnSeq, sh kernels.AttnShape, local bool) {
	if err := kernels.CheckAttend(out, q, k, v, seqs, sh, local); err != nil {
		panic(fmt.Sprintf("cpu: %s: %v", op, err))
	}
	hd := sh.HeadDim

	call.queries = call.queries[:0]
	for s, seq := range seqs {
		if !local {
			checkPages(op, s, seq, kernels.FirstPage(seq, sh), sh.BlockSize, k.rows)
		}
		for i := 0; i < seq.QLen; i += attnRows {
			n := min(attnRows, seq.QLen-i)
			call.queries = append(call.queries, attnQuery{seq: int32(s), i: int32(i), n: int32(n)})
		}
	}

	// A unit of work is up to attnRows consecutive query rows of one
	// sequence and a range of its KV heads (with the query heads that
	// share them). Decode batches have one row per sequence, so their heads
	// are split to keep every goroutine busy; a head's arithmetic is the
	// same whichever unit it lands in.
	queries := len(call.queries)
	parts := min(sh.NumKVHeads, max(1, (4*b.workers+queries-1)/max(queries, 1)))
	units := queries * parts
	workers := min(b.workers, units)
	group := sh.NumHeads / sh.NumKVHeads
	stride := headStride(hd)
	maxHeads := ((sh.NumKVHeads + parts - 1) / parts) * group
	for len(call.scratch) < workers {
		call.scratch = append(call.scratch, attnScratch{})
	}
	for w := range workers {
		sc := &call.scratch[w]
		if len(sc.acc) < attnRows*maxHeads*stride {
			sc.acc = alignedFloats(attnRows * maxHeads * stride)
		}
		if len(sc.sums) < attnRows*maxHeads {
			sc.sums = make([]float32, attnRows*maxHeads)
			sc.maxes = make([]float32, attnRows*maxHeads)
		}
	}

	b.parallel(units, func(w, u int) {
		qu := call.queries[u/parts]
		part := u % parts
		kv0, kv1 := part*sh.NumKVHeads/parts, (part+1)*sh.NumKVHeads/parts
		seq := &seqs[qu.seq]
		base := 0
		if local {
			base = seq.CtxLen - seq.QLen
		}
		kr := keyRows{local: local, qStart: seq.QStart, pages: seq.Pages, bs: sh.BlockSize}
		// Row r's visible keys: positions first..pos, in position order. A
		// window only moves the first one; the keys it keeps are visited in
		// the same order and in the same blocks as without it.
		var j0, j1 [attnRows]int
		for r := range int(qu.n) {
			pos := seq.CtxLen - seq.QLen + int(qu.i) + r
			j0[r], j1[r] = max(kernels.Visible(pos, sh.Window), base)-base, pos-base+1
		}
		row := seq.QStart + int(qu.i)
		sc := &call.scratch[w]
		if qu.n == 1 {
			// Only a decode row prefetches: the rows of a longer chunk
			// share their keys, which the first of them brings into cache.
			attendRow(kk, out.Row(row), q.Row(row), kd, vd, k.cols, kr, j0[0], j1[0],
				kv0*group, kv1*group, group, hd, sh.Scale, sh.SoftCap, seq.QLen == 1, sc)
			return
		}
		attendRows(kk, out, q, row, int(qu.n), kd, vd, k.cols, kr, &j0, &j1,
			kv0*group, kv1*group, group, hd, sh.Scale, sh.SoftCap, sc)
	})
}

// keyRows maps the index j of a visible key to its row of k and v: the
// chunk's own row QStart+j for AttendLocal, slot j of the page table for
// Attend.
type keyRows struct {
	local  bool
	qStart int
	pages  []int32
	bs     int
}

// fill sets rows[t] to the row of key j0+t.
func (kr *keyRows) fill(rows []int32, j0 int) {
	if kr.local {
		for t := range rows {
			rows[t] = int32(kr.qStart + j0 + t)
		}
		return
	}
	bs := kr.bs
	for t := 0; t < len(rows); {
		j := j0 + t
		page, off := int(kr.pages[j/bs]), j%bs
		n := min(bs-off, len(rows)-t)
		r := int32(page*bs + off)
		for i := range n {
			rows[t+i] = r + int32(i)
		}
		t += n
	}
}

// checkPages panics unless seq's page table covers its CtxLen tokens with
// blocks inside a kvRows-row cache, from page first on: the pages before
// it, outside every window of the call, are never read.
func checkPages(op string, s int, seq kernels.AttnSeq, first, bs, kvRows int) {
	if len(seq.Pages)*bs < seq.CtxLen {
		panic(fmt.Sprintf("cpu: %s: sequence %d has %d pages of %d for %d tokens", op, s, len(seq.Pages), bs, seq.CtxLen))
	}
	for p := first; p*bs < seq.CtxLen; p++ {
		page := int(seq.Pages[p])
		if page < 0 || (page+1)*bs > kvRows {
			panic(fmt.Sprintf("cpu: %s: sequence %d uses block %d of a %d-row cache", op, s, page, kvRows))
		}
	}
}

// headStride is the distance between per-head slots in scratch buffers: the
// head width rounded up to whole alignBytes chunks, so that every slot starts
// aligned.
func headStride(hd int) int {
	const per = alignBytes / 4
	return (hd + per - 1) / per * per
}

// attendRow computes query heads [h0, h1) of one query row: for each head,
// dst = softmax(scale·q·Kᵀ)·V over the keys j0, j0+1, ..., j1-1 (rows
// from kr), each scaled score soft-capped first when limit > 0. q and dst
// are whole rows (all heads); k and v have row stride ld and query head h
// reads KV head h/group.
//
// The keys go in blocks of attnBlock indices aligned to multiples of
// attnBlock, with a running maximum m and sum per head (online softmax):
// for each block, every score is one whole dot product in the order of
// dot.go; if the block's largest score exceeds m, the sum and the
// accumulator are first multiplied by exp(m_old - m_new) and m moves;
// then each exponent exp(s - m) is expNeg's (exp.go; within 2 ulp
// of math.Exp), the block's exponents are summed in eight lanes and a fixed
// tree (laneSum, the order of dot.go) and that is added to the sum, and every output
// element continues its chain of fused multiply-adds over the block's
// keys in order (attnkern.go). The result depends only on the query and
// the visited keys and their indices: not on where they are stored, nor on
// which other heads or rows share the call (attendRows does the same
// arithmetic for several rows at once).
func attendRow[E float32 | uint16](kk *kvKern[E], dst, q []float32, k, v []E, ld int, kr keyRows, j0, j1, h0, h1, group, hd int, scale, limit float32, pf bool, sc *attnScratch) {
	st := sc.state(0, h1-h0, hd)
	attendSpan(kk, &st, q, k, v, ld, kr, j0, j1, h0, group, hd, scale, limit, pf, sc)
	st.finish(dst, h0, hd)
}

// rowState is the online softmax of one query row, for nh heads: each
// head's running maximum, sum and accumulator (a headStride-wide slot).
type rowState struct {
	acc         []float32
	maxes, sums []float32
	nh, stride  int
}

// state returns row r's slot of the scratch space, reset for nh heads.
func (sc *attnScratch) state(r, nh, hd int) rowState {
	stride := headStride(hd)
	st := rowState{
		acc:   sc.acc[r*nh*stride : (r+1)*nh*stride],
		maxes: sc.maxes[r*nh : (r+1)*nh],
		sums:  sc.sums[r*nh : (r+1)*nh],
		nh:    nh, stride: stride,
	}
	clear(st.acc)
	for i := range nh {
		st.maxes[i], st.sums[i] = float32(math.Inf(-1)), 0
	}
	return st
}

// head returns head i's accumulator (hd wide).
func (st *rowState) head(i, hd int) []float32 { return st.acc[i*st.stride : i*st.stride+hd] }

// finish writes dst's heads [h0, h0+nh): each accumulator over its sum.
func (st *rowState) finish(dst []float32, h0, hd int) {
	for i := range st.nh {
		o := dst[(h0+i)*hd : (h0+i+1)*hd]
		for d, a := range st.head(i, hd) {
			o[d] = a / st.sums[i]
		}
	}
}

// attendSpan folds the keys j0..j1-1 into the row's state st, block by
// block as attendRow describes; j0 and j1 need not be block boundaries.
func attendSpan[E float32 | uint16](kk *kvKern[E], st *rowState, q []float32, k, v []E, ld int, kr keyRows, j0, j1, h0, group, hd int, scale, limit float32, pf bool, sc *attnScratch) {
	ks := &kern
	// While one head works on a block, the keys and values the next head
	// (or, after the last head, the first head of the next block) will
	// read are prefetched (when pf and the next head reads another KV
	// head's): they are rows of a cache too large to stay in the caches
	// from one token to the next.
	at := func(i int) int { return ((h0 + i) / group) * hd }
	prefetch := func(rows []int32, i int) {
		if !pf {
			return
		}
		kk.prefetchRows(k, at(i), rows, ld, hd)
		kk.prefetchRows(v, at(i), rows, ld, hd)
	}
	blockEnd := func(b0 int) int { return min(j1, (b0/attnBlock+1)*attnBlock) }
	cur, next := sc.rows[0][:], sc.rows[1][:]
	if j0 < j1 {
		cur = cur[:blockEnd(j0)-j0]
		kr.fill(cur, j0)
		prefetch(cur, 0)
	}
	for b0 := j0; b0 < j1; {
		b1 := blockEnd(b0)
		rows := cur
		next = next[:0]
		if b1 < j1 {
			next = next[:blockEnd(b1)-b1]
			kr.fill(next, b1)
		}
		hs := sc.scores[:b1-b0]
		for i := range st.nh {
			if i+1 < st.nh {
				if at(i+1) != at(i) { // the heads of a group share their keys
					prefetch(rows, i+1)
				}
			} else if len(next) > 0 {
				prefetch(next, 0)
			}
			scoresRowKV(kk, hs, q[(h0+i)*hd:(h0+i+1)*hd], k, at(i), rows, ld, hd)
			st.softmaxStep(ks, i, hs, scale, limit, hd)
			accumulateRowKV(kk, st.head(i, hd), hs, v, at(i), rows, ld, hd)
		}
		b0 = b1
		cur, next = next, cur[:cap(cur)]
	}
}

// softmaxStep turns one block's raw scores hs of head i into the weights
// the values are summed with: scaled (and soft-capped), the running
// maximum moved (rescaling the sum and accumulator) if the block holds a
// larger score, each replaced by exp(s - m), and their sum (laneSum's
// order) added to the running sum.
func (st *rowState) softmaxStep(ks *kernelSet, i int, hs []float32, scale, limit float32, hd int) {
	var m float32
	if limit > 0 {
		m = float32(math.Inf(-1))
		for t, s := range hs {
			hs[t] = softCap(s*scale, limit)
			m = max(m, hs[t])
		}
	} else {
		m = ks.attn.scaleMax(hs, scale)
	}
	ai := st.head(i, hd)
	if old := st.maxes[i]; m > old {
		if !math.IsInf(float64(old), -1) {
			// expNeg(old - m), through the kernel: the Go expNeg emulates
			// each fused multiply-add in software, and the kernel takes
			// eight values at a time (all eight the same here).
			e := [8]float32{old, old, old, old, old, old, old, old}
			ks.attn.expShift(e[:], m)
			alpha := e[0]
			st.sums[i] *= alpha
			ks.attn.scaleMax(ai, alpha)
		}
		st.maxes[i] = m
	}
	ks.attn.expShift(hs, st.maxes[i])
	st.sums[i] += laneSum(ks, hs)
}

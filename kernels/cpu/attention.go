package cpu

import (
	"fmt"
	"math"

	"kvlab/kernels"
)

// attnQuery names one query row of an attention call: row i of sequence seq.
type attnQuery struct{ seq, i int32 }

// attnScratch is one worker's scratch space.
type attnScratch struct {
	acc    []float32 // one aligned headStride-wide slot per head
	scores []float32 // per head: one per visible key
	sums   []float32 // per head: the softmax denominator
}

// attnCall is the per-call bookkeeping of an attention operation, pooled so
// that a decode step does not allocate.
type attnCall struct {
	rowBuf  []int32
	tables  [][]int32 // per sequence: KV row of position bases[s]+t at index t
	bases   []int     // per sequence: position of tables[s][0]
	queries []attnQuery
	scratch []attnScratch // per worker
}

// Attend computes causal attention, reading keys and values through each
// sequence's page table.
func (b *Backend) Attend(out, q, kc, vc kernels.Tensor, seqs []kernels.AttnSeq, shape kernels.AttnShape) {
	b.attend("Attend", asCPU(out), asCPU(q), asCPU(kc), asCPU(vc), seqs, shape, false)
}

// AttendLocal computes causal attention within each sequence's own chunk,
// reading keys and values from this step's k and v rows. It runs the very
// same per-query arithmetic as Attend, so when a chunk is a whole prompt
// (CtxLen == QLen) the two agree bit for bit.
func (b *Backend) AttendLocal(out, q, k, v kernels.Tensor, seqs []kernels.AttnSeq, shape kernels.AttnShape) {
	b.attend("AttendLocal", asCPU(out), asCPU(q), asCPU(k), asCPU(v), seqs, shape, true)
}

// attend is the driver shared by Attend and AttendLocal. The only difference
// between them is the table that maps a key position to a row of k and v;
// everything after that is common, so they cannot drift apart numerically.
func (b *Backend) attend(op string, out, q, k, v *Tensor, seqs []kernels.AttnSeq, sh kernels.AttnShape, local bool) {
	if err := kernels.CheckAttend(out, q, k, v, seqs, sh, local); err != nil {
		panic(fmt.Sprintf("cpu: %s: %v", op, err))
	}
	hd := sh.HeadDim

	call, _ := b.attn.Get().(*attnCall)
	if call == nil {
		call = new(attnCall)
	}
	defer b.attn.Put(call)

	total, longest := 0, 0
	for _, seq := range seqs {
		span := seq.CtxLen
		if local {
			span = seq.QLen
		}
		total += span
		longest = max(longest, span)
	}

	call.rowBuf = growInt32(call.rowBuf, total)
	call.tables = call.tables[:0]
	call.bases = call.bases[:0]
	call.queries = call.queries[:0]
	used := 0
	for s, seq := range seqs {
		var tab []int32
		base := 0
		if local {
			base = seq.CtxLen - seq.QLen
			tab = call.rowBuf[used : used+seq.QLen]
			for t := range tab {
				tab[t] = int32(seq.QStart + t)
			}
		} else {
			tab = call.rowBuf[used : used+seq.CtxLen]
			pageTable(op, s, seq, kernels.FirstPage(seq, sh), sh.BlockSize, k.rows, tab)
		}
		used += len(tab)
		call.tables = append(call.tables, tab)
		call.bases = append(call.bases, base)
		for i := range seq.QLen {
			call.queries = append(call.queries, attnQuery{seq: int32(s), i: int32(i)})
		}
	}

	// A unit of work is one query row and a range of its KV heads (with the
	// query heads that share them). Decode batches have few rows, so their
	// heads are split to keep every goroutine busy; a head's arithmetic is
	// the same whichever unit it lands in.
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
		if len(sc.acc) < maxHeads*stride {
			sc.acc = alignedFloats(maxHeads * stride)
		}
		if len(sc.scores) < maxHeads*longest {
			sc.scores = make([]float32, maxHeads*longest)
		}
		if len(sc.sums) < maxHeads {
			sc.sums = make([]float32, maxHeads)
		}
	}

	b.parallel(units, func(w, u int) {
		qu := call.queries[u/parts]
		part := u % parts
		kv0, kv1 := part*sh.NumKVHeads/parts, (part+1)*sh.NumKVHeads/parts
		seq := &seqs[qu.seq]
		pos := seq.CtxLen - seq.QLen + int(qu.i)
		// The visible keys: positions first..pos, in position order. A
		// window only moves the first one; the keys it keeps are visited in
		// the same order as without it.
		base := call.bases[qu.seq]
		first := max(kernels.Visible(pos, sh.Window), base)
		rows := call.tables[qu.seq][first-base : pos-base+1]
		row := seq.QStart + int(qu.i)
		attendRow(out.Row(row), q.Row(row), k.Data, v.Data, k.cols, rows,
			kv0*group, kv1*group, group, hd, sh.Scale, sh.SoftCap, &call.scratch[w])
	})
}

// pageTable fills tab[j] with the KV row of position j of seq, from page
// first on; the positions before it, outside every window of the call, get
// -1 and are never read.
func pageTable(op string, s int, seq kernels.AttnSeq, first, bs, kvRows int, tab []int32) {
	if len(seq.Pages)*bs < seq.CtxLen {
		panic(fmt.Sprintf("cpu: %s: sequence %d has %d pages of %d for %d tokens", op, s, len(seq.Pages), bs, seq.CtxLen))
	}
	for j := range tab {
		if j < first*bs {
			tab[j] = -1
			continue
		}
		page := int(seq.Pages[j/bs])
		if page < 0 || (page+1)*bs > kvRows {
			panic(fmt.Sprintf("cpu: %s: sequence %d uses block %d of a %d-row cache", op, s, page, kvRows))
		}
		tab[j] = int32(page*bs + j%bs)
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
// dst = softmax(scale·q·Kᵀ)·V over the keys at rows[0], rows[1], ... in that
// (position) order, each scaled score soft-capped first when limit > 0. q and dst are whole rows (all heads); k and v have row
// stride ld and query head h reads KV head h/group.
//
// For each head, every score is one whole dot product in the order of
// dot.go, the exponent goes through float64 math.Exp rounded back to
// float32, and every output element is a chain of fused multiply-adds over
// the keys in position order (attnkern.go), so the result depends only on
// the query and the visited keys and values: not on where they are stored,
// nor on which other heads or rows share the call.
func attendRow(dst, q, k, v []float32, ld int, rows []int32, h0, h1, group, hd int, scale, limit float32, sc *attnScratch) {
	nh, n, stride := h1-h0, len(rows), headStride(hd)
	ks := &kern

	scores := sc.scores[:nh*n] // head-major: scores[i*n+t]
	for i := range nh {
		at := ((h0 + i) / group) * hd
		hs := scores[i*n : (i+1)*n]
		scoresRow(ks, hs, q[(h0+i)*hd:(h0+i+1)*hd], k, at, rows, ld, hd)
		for t := range hs {
			hs[t] *= scale
		}
		if limit > 0 {
			for t, s := range hs {
				hs[t] = softCap(s, limit)
			}
		}
	}

	sums := sc.sums[:nh]
	for i := range nh {
		hs := scores[i*n : (i+1)*n]
		m := float32(math.Inf(-1))
		for _, s := range hs {
			m = max(m, s)
		}
		var sum float32
		for t, s := range hs {
			e := float32(math.Exp(float64(s - m)))
			hs[t] = e
			sum += e
		}
		sums[i] = sum
	}

	acc := sc.acc[:nh*stride]
	clear(acc)
	for i := range nh {
		at := ((h0 + i) / group) * hd
		accumulateRow(ks, acc[i*stride:i*stride+hd], scores[i*n:(i+1)*n], v, at, rows, ld, hd)
	}

	for i := range nh {
		o := dst[(h0+i)*hd : (h0+i+1)*hd]
		for d, a := range acc[i*stride : i*stride+hd] {
			o[d] = a / sums[i]
		}
	}
}

func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"kvlab/kernels"
)

// attnRows is ATT_ROWS in src/attention.cu: the (query, head) rows of one work
// item; attnChunk is ATT_CHUNK, the most keys one work item reads;
// attnTile is ATT_TILE, the keys of one tile (a work item's first key is a
// multiple of it). The two sides must agree.
const (
	attnRows  = 8
	attnChunk = 256
	attnTile  = 32
)

// attnPlan is the host-side description of one attention launch, built into
// reusable slices so that a decode step does not allocate.
type attnPlan struct {
	seqs   []int32 // 4 per sequence: qstart, qlen, pos0, page-table offset
	items  []int32 // 4 per work item: sequence, first row, first key, partial slot or -1
	groups []int32 // 4 per split row group: sequence, first row, first slot, chunks
	pages  []int32 // every sequence's page table, concatenated
	slots  int     // partial-result slots the split items write
}

// Attend computes causal attention, reading keys and values through each
// sequence's page table, with AttnShape's sliding window and soft cap when
// set (see src/attention.cu).
// A cache held in 16 bits (NewKV) runs the kernel's instantiation that
// widens its keys and values as it loads them.
func (b *Backend) Attend(out, q, kc, vc kernels.Tensor, seqs []kernels.AttnSeq, shape kernels.AttnShape) {
	k, v, _ := asKV("Attend", kc, vc)
	b.attend("Attend", asCUDA(out), asCUDA(q), k, v, seqs, shape, false)
}

// AttendLocal computes causal attention within each sequence's own chunk,
// reading keys and values from this step's k and v rows.
func (b *Backend) AttendLocal(out, q, k, v kernels.Tensor, seqs []kernels.AttnSeq, shape kernels.AttnShape) {
	b.attend("AttendLocal", asCUDA(out), asCUDA(q), asCUDA(k), asCUDA(v), seqs, shape, true)
}

func (b *Backend) attend(op string, out, q, k, v *Tensor, seqs []kernels.AttnSeq, sh kernels.AttnShape, local bool) {
	if err := kernels.CheckAttend(out, q, k, v, seqs, sh, local); err != nil {
		panic(fmt.Sprintf("cuda: %s: %v", op, err))
	}
	hd := sh.HeadDim
	if hd > attnHeadDims[len(attnHeadDims)-1] {
		panic(fmt.Sprintf("cuda: %s: head dim %d exceeds the kernel's limit of %d", op, hd, attnHeadDims[len(attnHeadDims)-1]))
	}

	defer b.enter()()
	p := &b.plan
	p.seqs, p.items, p.groups, p.pages, p.slots = p.seqs[:0], p.items[:0], p.groups[:0], p.pages[:0], 0
	group := sh.NumHeads / sh.NumKVHeads
	for s, seq := range seqs {
		pos0, off := seq.CtxLen-seq.QLen, len(p.pages)
		if local {
			pos0 = 0
		} else {
			checkPages(op, s, seq, kernels.FirstPage(seq, sh), sh.BlockSize, k.rows)
			// Only the blocks the context reaches are uploaded.
			p.pages = append(p.pages, seq.Pages[:(seq.CtxLen+sh.BlockSize-1)/sh.BlockSize]...)
		}
		p.seqs = append(p.seqs, int32(seq.QStart), int32(seq.QLen), int32(pos0), int32(off))
		for row := 0; row < seq.QLen*group; row += attnRows {
			// The item's rows see keys first..last: first is the window's
			// start for its first row, the earliest of them.
			first := kernels.Visible(pos0+row/group, sh.Window)
			p.addItem(s, row, first, pos0+(min(row+attnRows, seq.QLen*group)-1)/group+1)
		}
	}
	if len(p.items) == 0 {
		return
	}

	fns := &b.fn.attention
	switch k.kv {
	case kernels.KVBF16:
		fns = &b.fn.attentionBF16
	case kernels.KVF16:
		fns = &b.fn.attentionF16
	}
	fn := fns[len(attnHeadDims)-1]
	for i, d := range attnHeadDims {
		if hd <= d {
			fn = fns[i]
			break
		}
	}
	sp := b.upload(roleSeqs, op, int32Bytes(p.seqs))
	ip := b.upload(roleItems, op, int32Bytes(p.items))
	pp := b.upload(rolePages, op, int32Bytes(p.pages))
	var part, gp devPtr
	if p.slots > 0 {
		part = b.meta[roleAttnPart].scratch(op, int64(4*p.slots*sh.NumKVHeads*attnRows*(hd+2)))
		gp = b.upload(roleAttnGroups, op, int32Bytes(p.groups))
	}
	isLocal := 0
	if local {
		isLocal = 1
	}
	b.launch(op, fn, len(p.items)/4, sh.NumKVHeads, 128,
		ptrArg(out), ptrArg(q), ptrArg(k), ptrArg(v), devArg(sp), devArg(ip), devArg(pp),
		intArg(sh.NumHeads), intArg(sh.NumKVHeads), intArg(hd), intArg(max(sh.BlockSize, 1)),
		floatArg(sh.Scale), intArg(isLocal), devArg(part), intArg(sh.Window), floatArg(sh.SoftCap))
	if p.slots > 0 {
		b.launch(op, b.fn.attentionMerge, len(p.groups)/4, sh.NumKVHeads, 128,
			ptrArg(out), devArg(part), devArg(sp), devArg(gp),
			intArg(sh.NumHeads), intArg(sh.NumKVHeads), intArg(hd))
	}
}

// addItem plans the work item(s) of rows [row, row+attnRows) of sequence s,
// which see keys [first, nkeys) (first > 0 only under a sliding window).
// The keys are cut on a fixed grid of attnChunk-key chunks, chunk c holding
// keys [c·attnChunk, (c+1)·attnChunk); only the chunks that hold a key in
// [first, nkeys) are planned, so a chunk entirely before the window is
// skipped, never read, and the first item starts at the 32-key tile that
// holds first. Keys of those items that a row's window excludes are masked
// in the kernel. Keys in one chunk make one item that
// writes its rows of out. Keys in several chunks are split
// (flash-decoding): one item per chunk, each writing its partial
// maximum, normaliser and output to a slot of its own, and a group that
// tells attention_merge to combine those slots in chunk order. The split
// depends on the rows' own context only, never on the other sequences of
// the batch, so a sequence's result does not depend on what it is batched
// with; it gives a long decode context many blocks instead of NumKVHeads.
func (p *attnPlan) addItem(s, row, first, nkeys int) {
	c0, c1 := first/attnChunk, (nkeys-1)/attnChunk
	start := first / attnTile * attnTile
	if c0 == c1 {
		p.items = append(p.items, int32(s), int32(row), int32(start), -1)
		return
	}
	p.groups = append(p.groups, int32(s), int32(row), int32(p.slots), int32(c1-c0+1))
	for c := c0; c <= c1; c++ {
		p.items = append(p.items, int32(s), int32(row), int32(max(c*attnChunk, start)), int32(p.slots))
		p.slots++
	}
}

// checkPages panics unless seq's page table covers its context with blocks
// that exist in a kvRows-row cache from page first on, as the CPU backend
// requires; the kernel reads no page before first (see kernels.FirstPage).
func checkPages(op string, s int, seq kernels.AttnSeq, first, bs, kvRows int) {
	if len(seq.Pages)*bs < seq.CtxLen {
		panic(fmt.Sprintf("cuda: %s: sequence %d has %d pages of %d for %d tokens", op, s, len(seq.Pages), bs, seq.CtxLen))
	}
	for _, page := range seq.Pages[first : (seq.CtxLen+bs-1)/bs] {
		if page < 0 || (int(page)+1)*bs > kvRows {
			panic(fmt.Sprintf("cuda: %s: sequence %d uses block %d of a %d-row cache", op, s, page, kvRows))
		}
	}
}

// Package kernels defines the compute operations a transformer forward and a
// paged KV pool need, independently of where the numbers live.
//
// A Backend owns its memory. Activations, weights and the KV pool are Tensors:
// opaque handles that the CPU backend backs with Go slices and a device backend
// backs with device memory. Small integer metadata that the host decides every
// step (token ids, positions, page tables) crosses the interface as plain Go
// slices; a device backend uploads them itself.
//
// Every tensor is a dense, row-major 2-D matrix of float32 values. Rows are
// tokens (or KV slots); columns are features. That one shape covers every
// operation here and keeps the interface small. The exceptions hold 16-bit
// values behind the same shape: weights a backend keeps as bfloat16, and KV
// caches of a 16-bit KVDType (KVCacher), which only the operations that
// take a cache accept.
//
// Batch invariance is part of the contract for the CPU backend: the value
// computed for one row never depends on which other rows share the call. The
// engine's "same output with and without the cache" tests rely on it.
package kernels

// Tensor is an opaque rows×cols float32 matrix owned by a Backend.
type Tensor interface {
	Rows() int
	Cols() int
}

// AttnSeq describes one sequence's slice of an attention call.
//
// The sequence contributes QLen query rows, starting at row QStart of the
// query tensor. Its context after this step holds CtxLen tokens, so query row
// i sits at position CtxLen-QLen+i and attends to positions 0..that position
// (causal). A decode is QLen == 1; a prefill chunk is QLen > 1; both may be
// mixed freely in one call. With a sliding window (AttnShape.Window = W > 0)
// the query at position p sees only positions p-W+1..p: itself and the W-1
// before it.
type AttnSeq struct {
	QStart int
	QLen   int
	CtxLen int
	// Pages lists the sequence's KV blocks in order: position p lives in
	// block Pages[p/BlockSize] at offset p%BlockSize. Unused by AttendLocal.
	// The entries before FirstPage are never read: they may be -1, a block
	// a sliding-window layer has already given back.
	Pages []int32
}

// FirstPage returns the index of the first page of seq that an attention
// call with shape sh reads: the block holding the first position visible
// to seq's first query row. With no window it is 0; with one, every block
// before it lies wholly before every window of the call.
func FirstPage(seq AttnSeq, sh AttnShape) int {
	if sh.BlockSize <= 0 {
		return 0
	}
	return Visible(seq.CtxLen-seq.QLen, sh.Window) / sh.BlockSize
}

// AttnShape holds the per-call constants of an attention operation.
type AttnShape struct {
	NumHeads   int     // query heads
	NumKVHeads int     // key/value heads (grouped-query attention: NumHeads % NumKVHeads == 0)
	HeadDim    int     // features per head
	BlockSize  int     // tokens per KV block
	Scale      float32 // multiplier on q·k, usually 1/sqrt(HeadDim)
	// Window, when > 0, limits each query to the Window most recent
	// positions, its own included: a query at position p sees keys at
	// positions in (p-Window, p]. HuggingFace's sliding-window mask is the
	// same (key j visible when j > p - sliding_window). 0 means no window:
	// every position up to p.
	Window int
	// SoftCap, when > 0, caps every scaled score s as SoftCap·tanh(s/SoftCap)
	// before the softmax (Gemma's attn_logit_softcapping). 0 leaves the
	// scores alone.
	SoftCap float32
}

// Visible returns the first position a query at position pos sees under
// window (0 = no window): max(0, pos-window+1).
func Visible(pos, window int) int {
	if window <= 0 {
		return 0
	}
	return max(0, pos-window+1)
}

// Backend is the set of operations the model and the KV pool use.
//
// Unless a method says otherwise, dst must not alias an input, and the
// shapes must agree; a Backend may panic on a shape mismatch, since that is a
// programming error, not bad user input.
type Backend interface {
	// Name identifies the backend in logs and tables ("cpu", "cuda").
	Name() string

	// New returns a zeroed rows×cols tensor.
	New(rows, cols int) Tensor
	// FromHost returns a rows×cols tensor holding a copy of data
	// (len(data) == rows*cols).
	FromHost(rows, cols int, data []float32) Tensor
	// ToHost copies t into dst (len(dst) == Rows*Cols) and returns dst.
	ToHost(t Tensor, dst []float32) []float32
	// Free releases t's memory. Using t afterwards is an error.
	Free(t Tensor)
	// View returns rows [from, from+n) of t, sharing its memory. Used to run
	// an operation on a prefix of a scratch tensor sized for the largest step.
	View(t Tensor, from, n int) Tensor

	// MatMulT computes dst = x · wᵀ, where x is n×in and w is out×in (the
	// layout of a HuggingFace Linear weight); dst is n×out.
	MatMulT(dst, x, w Tensor)
	// Add computes dst += x element-wise (the residual connection).
	Add(dst, x Tensor)
	// RMSNorm normalises each row of x into dst: x / sqrt(mean(x²)+eps) * weight,
	// weight being 1×cols. dst may equal x.
	RMSNorm(dst, x, weight Tensor, eps float32)
	// RMSNormHeads applies RMSNorm in place to every headDim-wide slice of
	// every row of x, with a 1×headDim weight (Qwen3's per-head q/k norm).
	RMSNormHeads(x, weight Tensor, headDim int, eps float32)
	// RoPE rotates x in place: row r is at position pos[r]; each row holds
	// cols/headDim heads; invFreq has headDim/2 entries. The rotation pairs
	// element i with i+headDim/2 (HuggingFace's rotate_half convention).
	RoPE(x Tensor, pos []int32, headDim int, invFreq []float32)
	// SiLUMul computes dst = silu(gate) * up element-wise.
	SiLUMul(dst, gate, up Tensor)
	// Embed copies table row ids[r] into dst row r.
	Embed(dst, table Tensor, ids []int32)
	// GatherRows copies src row rows[r] into dst row r.
	GatherRows(dst, src Tensor, rows []int32)

	// WriteKV stores row r of k and v into row slots[r] of the caches kc and
	// vc, whose rows are KV slots: slot = block*BlockSize + offset. A
	// negative slot skips the row: its KV is already in the cache (a prompt
	// found whole in a prefix cache recomputes its last token only for the
	// logits, and must not write into a block other sequences share).
	//
	// When kc and vc hold a 16-bit dtype (KVCacher), each value is rounded
	// to it (nearest, ties to even), and every row of k and v, skipped or
	// not, is overwritten with its rounded values: AttendLocal over k and v
	// then sees what Attend over the cache sees, so a whole-prompt prefill
	// and a chunked one still agree.
	WriteKV(kc, vc, k, v Tensor, slots []int32)
	// CopyBlock copies the blockSize rows of block src to block dst in both
	// kc and vc (copy-on-write).
	CopyBlock(kc, vc Tensor, src, dst int32, blockSize int)
	// Attend computes causal attention for every sequence in seqs, reading
	// keys and values from the paged caches kc and vc through each
	// sequence's page table. q is n×(NumHeads*HeadDim), out the same.
	Attend(out, q, kc, vc Tensor, seqs []AttnSeq, shape AttnShape)
	// AttendLocal is Attend for a whole-prompt prefill that reads keys and
	// values from this step's k and v rows (same row layout as q) instead of
	// the cache: each sequence sees only the tokens of its own chunk, so it
	// is correct only when the chunk starts at position 0.
	AttendLocal(out, q, k, v Tensor, seqs []AttnSeq, shape AttnShape)

	// SoftmaxRows replaces every row of x by its softmax, in place.
	SoftmaxRows(x Tensor)
	// ArgmaxRows returns, for every row of x, the column of its largest value
	// (the smallest such column on ties).
	ArgmaxRows(x Tensor) []int32
}

// GemmaOps are the element-wise operations Gemma-3 needs beyond Backend.
// They are a separate interface so that a backend without them still runs
// Llama and Qwen3; model.Load refuses a Gemma-3 checkpoint on such a backend.
type GemmaOps interface {
	// GELUTanhMul computes dst = gelu_tanh(gate) * up element-wise, where
	// gelu_tanh(x) = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), the
	// approximation HuggingFace calls gelu_pytorch_tanh.
	GELUTanhMul(dst, gate, up Tensor)
	// SoftCap replaces every element x of t by limit·tanh(x/limit), in place.
	SoftCap(t Tensor, limit float32)
	// Scale multiplies every element of t by s in place, then, when round is
	// not nil, replaces each product p by round(p) (Gemma's embedding scale,
	// computed in the embedding's dtype).
	Scale(t Tensor, s float32, round func(float32) float32)
}

// Product is one matrix product of a ProductBatcher call: Dst = x · Wᵀ.
type Product struct{ Dst, W Tensor }

// ProductBatcher is an optional Backend method for the products of one
// input with several weights (a layer's q, k and v projections, or its gate
// and up): each ps[i].Dst = x · ps[i].Wᵀ with exactly the bits MatMulT
// gives, the backend being free to share the work of all of them out at
// once. A decode step is made of many small products, each of which hands
// work to the cores and waits for them; batching cuts those hand-offs.
type ProductBatcher interface {
	MatMulTMany(x Tensor, ps []Product)
}

// MatMulTMany computes ps[i].Dst = x · ps[i].Wᵀ for every i, through be's
// ProductBatcher when it has one and one MatMulT at a time otherwise.
func MatMulTMany(be Backend, x Tensor, ps []Product) {
	if pb, ok := be.(ProductBatcher); ok {
		pb.MatMulTMany(x, ps)
		return
	}
	for _, p := range ps {
		be.MatMulT(p.Dst, x, p.W)
	}
}

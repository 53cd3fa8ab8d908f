// Package cpu implements kernels.Backend in pure Go on the host CPU.
//
// Every tensor is a Go []float32 slice, so tests and other CPU-only code can
// reach the numbers directly through Data.
//
// # Batch invariance
//
// The contract this package is built around is that the value computed for
// one row never depends on which other rows share the call: a token's logits
// are bit-identical whether it was decoded alone, inside a batch of 300, as
// row 0 or as row 137, or as part of a prefill chunk. Floating-point addition
// is not associative, so this only holds if the order of every reduction is
// fixed by the row's own data and the shapes of the weights, never by the
// batch size. Each kernel below says how it keeps that promise.
//
// # Matrix multiplication
//
// MatMulT computes every output element as one dot product in a single
// order fixed by the inner dimension alone (dot.go): eight lane sums of
// fused multiply-adds, a fixed pairwise tree over the lanes, then the
// leftover terms in index order. On amd64 with AVX2 and FMA the kernels are
// hand-written assembly (dot_amd64.s) that follow that order instruction
// for instruction: 3×4 register tiles for batches and a one-row kernel
// that streams the weights for decode. Everywhere else (and with the
// purego build tag) Go kernels compute the same order with an exact
// emulation of the float32 fused multiply-add, so the two paths agree bit
// for bit. Because no kernel ever splits a reduction, the number of rows,
// the tiling and the number of goroutines cannot change any result.
//
// Earlier versions called gonum's Sgemm on fixed 64×64 tiles. Gonum's
// kernels are SSE without FMA, and its Sgemm changes its reduction order
// with the size of the problem (see TestWholeSgemmBatchVariance), so it
// could only be used in small pieces; the kernels here are several times
// faster and batch invariant by construction.
//
// # Attention
//
// Attend and AttendLocal share one per-query routine that visits keys in
// position order; they only differ in how a position maps to a row of the
// key/value tensors. Both are parallel across query rows and, when there are
// few rows, across groups of heads. Each head of each query is computed by
// one goroutine from start to finish, in an order fixed by its own position,
// so neither parallelism nor batching can change a result. Its scores and
// its weighted sum of values run on the same kind of kernels as MatMulT
// (assembly on amd64, Go elsewhere, the same bits either way): each score
// is one dot product in dot.go's order, each output element one chain of
// fused multiply-adds over the keys in position order.
package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"kvlab/kernels"
)

// Tensor is the CPU backend's tensor: a dense row-major rows×cols matrix
// held in Data. A View shares Data with the tensor it was cut from.
type Tensor struct {
	rows, cols int
	// Data holds Rows()*Cols() values, row after row. It is nil for a
	// bf16 weight (see FromHostBF16).
	Data []float32
	// bf16 holds a bf16 weight's values as bfloat16 bits, row after row;
	// nil for every other tensor.
	bf16 []uint16
	// kv16 holds a 16-bit KV cache's values (NewKV), of dtype kvdt, row
	// after row; nil for every other tensor.
	kv16 []uint16
	kvdt kernels.KVDType
}

// Rows returns the number of rows.
func (t *Tensor) Rows() int { return t.rows }

// Cols returns the number of columns.
func (t *Tensor) Cols() int { return t.cols }

// Row returns row r of t, sharing memory, so that callers can read or patch a
// single token without computing offsets themselves.
func (t *Tensor) Row(r int) []float32 {
	return t.Data[r*t.cols : (r+1)*t.cols : (r+1)*t.cols]
}

// Data returns the slice behind a CPU tensor. It panics if t was made by
// another backend, because then there is no host slice to return.
func Data(t kernels.Tensor) []float32 { return asCPU(t).Data }

// Wrap turns an existing slice into a tensor without copying, for tests and
// loaders that already hold the numbers. len(data) must be rows*cols.
func Wrap(rows, cols int, data []float32) *Tensor {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		panic(fmt.Sprintf("cpu: Wrap %d×%d with %d values", rows, cols, len(data)))
	}
	return &Tensor{rows: rows, cols: cols, Data: data}
}

// WrapHost is Wrap as a method, for a loader that reaches the backend
// through an interface: a weight can then be float32 values the loader
// already holds (a checkpoint's bytes, mapped from the file) instead of a
// copy. The backend only ever reads a weight, so data may be read-only
// memory; the caller keeps it valid until the tensor is freed.
func (b *Backend) WrapHost(rows, cols int, data []float32) kernels.Tensor {
	if len(data) == 0 && rows*cols == 0 {
		data = []float32{}
	}
	return Wrap(rows, cols, data)
}

// asCPU returns t as a float32 CPU tensor.
func asCPU(t kernels.Tensor) *Tensor {
	c := asWeight(t)
	if c.bf16 != nil {
		panic("cpu: a bf16 weight can only be the weight of MatMulT or the table of Embed")
	}
	if c.kv16 != nil {
		panic("cpu: a 16-bit KV cache can only be the cache of WriteKV, CopyBlock and Attend")
	}
	return c
}

// asWeight returns t as a CPU tensor that may hold bf16 values.
func asWeight(t kernels.Tensor) *Tensor {
	c, ok := t.(*Tensor)
	if !ok {
		panic(fmt.Sprintf("cpu: tensor of type %T is not a CPU tensor", t))
	}
	if c.Data == nil && c.bf16 == nil && c.kv16 == nil && c.rows*c.cols != 0 {
		panic("cpu: use of a freed tensor")
	}
	return c
}

// Backend is the pure-Go implementation of kernels.Backend. Goroutines may
// share one Backend as long as they do not write the same tensors; its
// methods start their own goroutines where the work is large enough to pay
// for them.
type Backend struct {
	workers  int
	attn     sync.Pool // *attnCall, reused so that decode steps do not allocate
	poolOnce sync.Once
	pool     *workerPool // workers-1 helper goroutines, started on first use
	bf16Dot  bool        // bf16 products (bf16dot.go) for bf16 weights
	ropes    ropeTables  // RoPE's last cos and sin tables (ropetable.go)
}

var _ kernels.Backend = (*Backend)(nil)

// New returns a CPU backend that uses up to GOMAXPROCS goroutines per call.
func New() *Backend { return NewWithWorkers(runtime.GOMAXPROCS(0)) }

// NewWithWorkers returns a CPU backend that uses at most workers goroutines
// per call. Results do not depend on workers; only the speed does, which is
// what makes it useful for measuring scaling.
func NewWithWorkers(workers int) *Backend {
	return &Backend{workers: max(1, workers)}
}

// Name returns "cpu".
func (b *Backend) Name() string { return "cpu" }

// New returns a zeroed rows×cols tensor.
func (b *Backend) New(rows, cols int) kernels.Tensor {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpu: New(%d, %d)", rows, cols))
	}
	return &Tensor{rows: rows, cols: cols, Data: alignedFloats(rows * cols)}
}

// FromHost returns a tensor holding a copy of data.
func (b *Backend) FromHost(rows, cols int, data []float32) kernels.Tensor {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		panic(fmt.Sprintf("cpu: FromHost %d×%d with %d values", rows, cols, len(data)))
	}
	t := &Tensor{rows: rows, cols: cols, Data: alignedFloats(rows * cols)}
	copy(t.Data, data)
	return t
}

// ToHost copies t into dst and returns dst.
func (b *Backend) ToHost(t kernels.Tensor, dst []float32) []float32 {
	c := asWeight(t)
	if len(dst) != c.rows*c.cols {
		panic(fmt.Sprintf("cpu: ToHost of %d×%d into %d values", c.rows, c.cols, len(dst)))
	}
	if c.bf16 != nil {
		for i, h := range c.bf16 {
			dst[i] = widen(h)
		}
		return dst
	}
	if c.kv16 != nil {
		widenKV(dst, c.kv16, c.kvdt)
		return dst
	}
	copy(dst, c.Data)
	return dst
}

// Free drops the tensor's slice so that a later use panics instead of
// silently reading memory the caller meant to give up. Views of t keep
// their memory alive, as any Go slice would, except the memory of WrapHost
// and WrapBF16, which its owner may release (unmap) once the tensor is
// freed: views of such a tensor must not outlive it.
func (b *Backend) Free(t kernels.Tensor) {
	c := asWeight(t)
	c.Data, c.bf16, c.kv16 = nil, nil, nil
}

// View returns rows [from, from+n) of t, sharing its memory.
func (b *Backend) View(t kernels.Tensor, from, n int) kernels.Tensor {
	c := asWeight(t)
	if from < 0 || n < 0 || from+n > c.rows {
		panic(fmt.Sprintf("cpu: View rows [%d, %d) of a %d-row tensor", from, from+n, c.rows))
	}
	lo, hi := from*c.cols, (from+n)*c.cols
	if c.bf16 != nil {
		return &Tensor{rows: n, cols: c.cols, bf16: c.bf16[lo:hi:hi]}
	}
	if c.kv16 != nil {
		return &Tensor{rows: n, cols: c.cols, kv16: c.kv16[lo:hi:hi], kvdt: c.kvdt}
	}
	return &Tensor{rows: n, cols: c.cols, Data: c.Data[lo:hi:hi]}
}

// alignBytes is the alignment of every slice this package allocates: a
// cache line, so that rows of the KV cache and of activations do not
// straddle more lines than they must. No kernel's arithmetic depends on
// alignment (they all use unaligned loads and never peel).
const alignBytes = 64

// alignedFloats returns a zeroed slice of n float32 values whose first
// element is alignBytes-aligned. Go's garbage collector never moves heap
// objects, so the alignment holds for the slice's lifetime.
func alignedFloats(n int) []float32 {
	if n == 0 {
		return []float32{}
	}
	const pad = alignBytes / 4
	buf := make([]float32, n+pad)
	mis := int(uintptr(unsafe.Pointer(&buf[0])) % alignBytes)
	off := 0
	if mis != 0 {
		off = (alignBytes - mis) / 4
	}
	return buf[off : off+n : off+n]
}

// parallel calls body(worker, i) for every i in [0, n), spreading the calls
// over at most b.workers goroutines (the caller's included). worker is in
// [0, b.workers) and no two concurrent calls share it, so a body may keep
// per-worker scratch space indexed by it. Each i runs exactly once, on one
// goroutine, so the split cannot change any result.
//
// The other goroutines are the backend's long-lived helpers (pool.go). If
// another goroutine is using them (goroutines may share a Backend), the call
// starts goroutines of its own instead.
func (b *Backend) parallel(n int, body func(worker, i int)) {
	w := min(b.workers, n)
	if w <= 1 {
		for i := range n {
			body(0, i)
		}
		return
	}
	b.poolOnce.Do(func() {
		b.pool = newWorkerPool(b.workers - 1)
		// The helpers do not reference b, so b can become unreachable;
		// then they are told to exit.
		runtime.AddCleanup(b, (*workerPool).close, b.pool)
	})
	if b.pool.call(w, n, body) {
		return
	}
	var next atomic.Int64
	run := func(worker int) {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			body(worker, i)
		}
	}
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for worker := 1; worker < w; worker++ {
		go func() {
			defer wg.Done()
			run(worker)
		}()
	}
	run(0)
	wg.Wait()
}

func sameShape(op string, a, b *Tensor) {
	if err := kernels.CheckSameShape(a, b); err != nil {
		panic(fmt.Sprintf("cpu: %s: %v", op, err))
	}
}

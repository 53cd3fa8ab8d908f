//go:build cuda || cudaemu

package cuda

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"kvlab/kernels"
)

// devPtr is a device address. The CUDA driver's addresses are 64-bit
// integers, not Go pointers, so the garbage collector never sees them.
type devPtr uint64

// Tensor is the CUDA backend's tensor: a rows×cols row-major block of
// float32 values in device memory, or of bfloat16 values for a weight made
// by FromHostBF16. A View shares its parent's allocation.
type Tensor struct {
	ptr        devPtr
	rows, cols int
	mem        *allocation // shared by a tensor and its views
	view       bool
	freed      bool
	bf16       bool // elements are bf16 bit patterns (FromHostBF16)
	// kv is the dtype of a KV cache made by NewKV: KVF32 for every other
	// tensor; a 16-bit one holds bit patterns of that dtype.
	kv kernels.KVDType
}

// allocation is one device allocation, shared by a tensor and its views so
// that freeing the tensor makes every view unusable too.
type allocation struct {
	ptr   devPtr
	freed bool
}

// Rows returns the number of rows.
func (t *Tensor) Rows() int { return t.rows }

// Cols returns the number of columns.
func (t *Tensor) Cols() int { return t.cols }

// Ptr returns the device address of the tensor's first element, for code
// that launches its own kernels on the backend's tensors.
func (t *Tensor) Ptr() uint64 { return uint64(t.ptr) }

func (t *Tensor) elems() int { return t.rows * t.cols }

// elemBytes is the size of one element: 4, or 2 for a bf16 weight or a
// 16-bit KV cache.
func (t *Tensor) elemBytes() int {
	if t.bf16 || t.kv != kernels.KVF32 {
		return 2
	}
	return 4
}

// Backend implements kernels.Backend on one CUDA device (device 0 of those
// the driver exposes; set CUDA_VISIBLE_DEVICES to pick another), or, in the
// cudaemu build, on the CPU emulator of the same kernels.
//
// All work goes to the device's legacy default stream, so kernels run in
// the order they were issued and every upload waits for the kernels before
// it; operations return as soon as their kernels are queued, and only
// ToHost and ArgmaxRows wait for the GPU. A Backend may be shared by
// goroutines: a mutex serialises its calls, because the CUDA context has to
// be made current on whichever OS thread the calling goroutine runs on, and
// because the metadata buffers below are shared.
type Backend struct {
	mu   sync.Mutex
	drv  driver // what the driver needs: device and context (see driver_cu.go)
	desc string
	sms  int
	fn   functions

	// Host metadata (token ids, positions, slots, page tables, ...) goes
	// through one reusable device buffer per role, copied there from the
	// pinned staging buffer asynchronously (see Backend.upload).
	meta  [numRoles]metaBuf
	stage staging
	plan  attnPlan

	// pageable makes metadata uploads synchronous copies from pageable Go
	// memory instead, the way they were before the staging buffer: set
	// KVLAB_CUDA_PAGEABLE=1 to compare the two (TestAsyncUploadsMatchSync
	// does, on the emulator).
	pageable bool

	// argv holds the kernel arguments of the launch being prepared; each
	// driver hands it to the kernel without allocating (driver_cu.go,
	// driver_emu.go).
	argv [maxKernelArgs]uint64

	// syncEach makes every launch wait for its kernel, so that a fault is
	// reported by the operation and kernel that caused it rather than by a
	// later copy or free. Set KVLAB_CUDA_SYNC=1 when chasing a device error.
	syncEach bool
	// waitHook, when set, replaces the wait after each launch in sync mode,
	// so that tests can play a device fault on the emulator.
	waitHook func() error

	// forceMatmul, when set, overrides MatMulT's choice of kernel so that
	// tests can check every variant and benchmarks can compare them.
	forceMatmul matmulVariant
}

var _ kernels.Backend = (*Backend)(nil)

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

// Describe names the device, its compute capability, SM count and driver
// version, for logs and benchmark tables.
func (b *Backend) Describe() string { return b.desc }

// Synchronize waits until every queued kernel has finished. Benchmarks call
// it before reading the clock; nothing else needs to.
func (b *Backend) Synchronize() {
	defer b.enter()()
	check("Synchronize", devSync())
	b.stage.idle()
}

// releaseMeta frees the metadata buffers and the staging buffer; the caller
// holds the lock.
func (b *Backend) releaseMeta() {
	for i := range b.meta {
		b.meta[i].release()
	}
	b.stage.release()
}

// pageableEnv names the switch of Backend.pageable.
const pageableEnv = "KVLAB_CUDA_PAGEABLE"

// check panics with op's name if err is a driver error. The interface has no
// error results, and a failed allocation or launch leaves nothing sensible
// to continue with. Kernels run asynchronously, so a fault in one is
// reported by whatever waits next (a copy, a free, Synchronize) under that
// operation's name; the message says how to find the kernel.
func check(op string, err error) {
	if err != nil {
		panic(fmt.Sprintf("cuda: %s: %v (an earlier kernel may have faulted: rerun with %s=1 to name it)",
			op, err, syncEnv))
	}
}

// syncEnv names the switch of the backend's sync mode.
const syncEnv = "KVLAB_CUDA_SYNC"

// launchFailure is the panic message for kernel fn of operation op, launched
// on a gridX×gridY grid of block threads, that failed to launch (after is
// false) or failed while running, as the wait of the sync mode found.
func launchFailure(op, fn string, gridX, gridY, block int, after bool, err error) string {
	what := "launch failed"
	if after {
		what = "failed while running (" + syncEnv + "=1 waited for it)"
	}
	return fmt.Sprintf("cuda: %s: kernel %s on %d×%d blocks of %d threads: %s: %v", op, fn, gridX, gridY, block, what, err)
}

// asCUDA returns t as a float32 CUDA tensor; a bf16 weight is accepted only
// where asWeight is used (MatMulT's w, Embed's table, ToHost, View, Free).
func asCUDA(t kernels.Tensor) *Tensor {
	c := asWeight(t)
	if c.bf16 {
		panic("cuda: a bf16 weight (FromHostBF16) can only be MatMulT's w, Embed's table, or copied to the host")
	}
	if c.kv != kernels.KVF32 {
		panic("cuda: a 16-bit KV cache (NewKV) can only be the cache of WriteKV, CopyBlock and Attend, or copied to the host")
	}
	return c
}

// asKV returns the caches kc and vc of op and their dtype, which they
// must share; a bf16 weight is no cache.
func asKV(op string, kc, vc kernels.Tensor) (k, v *Tensor, dt kernels.KVDType) {
	k, v = asWeight(kc), asWeight(vc)
	if k.bf16 || v.bf16 {
		panic(fmt.Sprintf("cuda: %s: a bf16 weight is not a KV cache", op))
	}
	if k.kv != v.kv {
		panic(fmt.Sprintf("cuda: %s: K cache of %v, V cache of %v", op, k.kv, v.kv))
	}
	return k, v, k.kv
}

func asWeight(t kernels.Tensor) *Tensor {
	c, ok := t.(*Tensor)
	if !ok {
		panic(fmt.Sprintf("cuda: tensor of type %T is not a CUDA tensor", t))
	}
	if c.freed || (c.mem != nil && c.mem.freed) {
		panic("cuda: use of a freed tensor")
	}
	return c
}

func sameShape(op string, a, b *Tensor) {
	if err := kernels.CheckSameShape(a, b); err != nil {
		panic(fmt.Sprintf("cuda: %s: %v", op, err))
	}
}

// alloc returns an uninitialised rows×cols tensor (of bf16 values if bf16
// is set). Empty tensors get no device memory (the driver refuses zero-byte
// allocations).
func (b *Backend) alloc(rows, cols int, bf16 bool) *Tensor {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cuda: New(%d, %d)", rows, cols))
	}
	t := &Tensor{rows: rows, cols: cols, mem: &allocation{}, bf16: bf16}
	if n := int64(rows) * int64(cols); n > 0 {
		p, err := devAlloc(int64(t.elemBytes()) * n)
		check(fmt.Sprintf("allocating %d×%d floats", rows, cols), err)
		t.ptr, t.mem.ptr = p, p
	}
	return t
}

// memsetZero clears t's memory; the caller holds the lock.
func memsetZero(t *Tensor) error { return devZero(t.ptr, int64(t.elemBytes())*int64(t.elems())) }

// copyToHost copies len(dst) int32 values from device address p; the caller
// holds the lock.
func copyToHost(dst []int32, p devPtr) error {
	return devDtoH(unsafe.Pointer(&dst[0]), p, int64(4*len(dst)))
}

// New returns a zeroed rows×cols tensor.
func (b *Backend) New(rows, cols int) kernels.Tensor {
	defer b.enter()()
	t := b.alloc(rows, cols, false)
	if n := t.elems(); n > 0 {
		check("New", memsetZero(t))
	}
	return t
}

var _ kernels.KVCacher = (*Backend)(nil)

// NewKV returns a zeroed rows×cols KV cache of dtype dt: New for KVF32,
// otherwise two bytes a value, which WriteKV rounds to and the attention
// kernels widen from (src/write_kv.cu, src/attention.cu).
func (b *Backend) NewKV(rows, cols int, dt kernels.KVDType) kernels.Tensor {
	switch dt {
	case kernels.KVF32:
		return b.New(rows, cols)
	case kernels.KVBF16, kernels.KVF16:
	default:
		panic(fmt.Sprintf("cuda: NewKV of unknown dtype %v", dt))
	}
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cuda: NewKV(%d, %d)", rows, cols))
	}
	defer b.enter()()
	t := &Tensor{rows: rows, cols: cols, mem: &allocation{}, kv: dt}
	if n := int64(rows) * int64(cols); n > 0 {
		p, err := devAlloc(2 * n)
		check(fmt.Sprintf("allocating a %d×%d %v KV cache", rows, cols, dt), err)
		t.ptr, t.mem.ptr = p, p
		check("NewKV", memsetZero(t))
	}
	return t
}

// FromHost returns a tensor holding a copy of data.
func (b *Backend) FromHost(rows, cols int, data []float32) kernels.Tensor {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		panic(fmt.Sprintf("cuda: FromHost %d×%d with %d values", rows, cols, len(data)))
	}
	defer b.enter()()
	t := b.alloc(rows, cols, false)
	if len(data) > 0 {
		check("FromHost", devHtoD(t.ptr, unsafe.Pointer(&data[0]), int64(4*len(data))))
		b.stage.idle() // a pageable upload first waits for the stream
	}
	return t
}

// FromHostBF16 returns a weight tensor that holds data as bfloat16 on the
// device, each value rounded to the nearest bf16 (ties to even), so values
// read from a bf16 checkpoint are stored exactly. model.Load uses it for a
// bf16 checkpoint's 2-D weights (common/model/load.go's bf16Holder): a
// decode step then reads half the bytes of w. Such a tensor can be
// MatMulT's w (src/matmul.cu's matmul_bf16w_* kernels) or Embed's table
// (gather_rows_bf16); ToHost, View and Free work on it; every other
// operation panics. The matmul kernels round an f32 w to bf16 anyway, so a
// product has the same bits with either.
func (b *Backend) FromHostBF16(rows, cols int, data []float32) kernels.Tensor {
	if rows < 0 || cols < 0 || len(data) != rows*cols {
		panic(fmt.Sprintf("cuda: FromHostBF16 %d×%d with %d values", rows, cols, len(data)))
	}
	h := kernels.F32sToBF16(data)
	defer b.enter()()
	t := b.alloc(rows, cols, true)
	if len(h) > 0 {
		check("FromHostBF16", devHtoD(t.ptr, unsafe.Pointer(&h[0]), int64(2*len(h))))
		b.stage.idle()
	}
	return t
}

// ToHost copies t into dst and returns dst. It waits for every kernel queued
// before it.
func (b *Backend) ToHost(t kernels.Tensor, dst []float32) []float32 {
	c := asWeight(t)
	if len(dst) != c.elems() {
		panic(fmt.Sprintf("cuda: ToHost of %d×%d into %d values", c.rows, c.cols, len(dst)))
	}
	if len(dst) == 0 {
		return dst
	}
	defer b.enter()()
	if c.bf16 || c.kv != kernels.KVF32 {
		h := make([]uint16, len(dst))
		check("ToHost", devDtoH(unsafe.Pointer(&h[0]), c.ptr, int64(2*len(h))))
		for i, v := range h {
			if c.kv == kernels.KVF16 {
				dst[i] = kernels.F16ToF32(v)
			} else {
				dst[i] = math.Float32frombits(uint32(v) << 16)
			}
		}
	} else {
		check("ToHost", devDtoH(unsafe.Pointer(&dst[0]), c.ptr, int64(4*len(dst))))
	}
	b.stage.idle()
	return dst
}

// Free releases t's device memory. Freeing a tensor makes its views
// unusable as well (unlike the CPU backend, whose views keep the memory
// alive through the garbage collector); freeing a view only retires the
// view.
func (b *Backend) Free(t kernels.Tensor) {
	c := asWeight(t)
	c.freed = true
	if c.view || c.mem.ptr == 0 {
		return
	}
	defer b.enter()()
	// Kernels still queued may read the memory; cuMemFree does not wait for
	// them on its own.
	check("Free", devSync())
	b.stage.idle()
	check("Free", devFree(c.mem.ptr))
	c.mem.freed = true
}

// View returns rows [from, from+n) of t, sharing its memory.
func (b *Backend) View(t kernels.Tensor, from, n int) kernels.Tensor {
	c := asWeight(t)
	if from < 0 || n < 0 || from+n > c.rows {
		panic(fmt.Sprintf("cuda: View rows [%d, %d) of a %d-row tensor", from, from+n, c.rows))
	}
	return &Tensor{
		ptr:  c.ptr + devPtr(c.elemBytes()*from*c.cols),
		rows: n, cols: c.cols, mem: c.mem, view: true, bf16: c.bf16, kv: c.kv,
	}
}

// metaRole names one of the per-role metadata buffers.
type metaRole int

const (
	roleRows       metaRole = iota // Embed / GatherRows indices
	rolePos                        // RoPE positions
	roleFreq                       // RoPE inverse frequencies
	roleSlots                      // WriteKV slots
	roleSeqs                       // attention: per-sequence descriptors
	roleItems                      // attention: work items
	rolePages                      // attention: concatenated page tables
	roleArgmax                     // ArgmaxRows results (device to host)
	roleSlices                     // MatMulT: a split skinny product's partial sums (device only)
	roleAttnPart                   // attention: split items' partial results (device only)
	roleAttnGroups                 // attention: the split items' groups, for attention_merge
	numRoles
)

// metaBuf is a growable device buffer plus a host copy of what it holds.
//
// A forward pass passes the same positions, slots and page tables to every
// layer, so an upload is skipped whenever the bytes equal what the buffer
// already holds: a step uploads each kind of metadata once (about six
// uploads a decode step). The device copy is never written by a kernel, so
// the host copy stays exact.
type metaBuf struct {
	ptr  devPtr
	cap  int64
	host []byte
}

// upload makes the metadata buffer of role hold data and returns its device
// address; the caller holds the lock.
//
// A copy from pageable (ordinary Go) memory waits for every kernel queued
// before it, so each upload would drain the GPU's queue: six times a
// decode step. Instead the bytes go into the pinned staging buffer and an
// asynchronous copy is queued on the stream, behind the kernels that may
// still read the buffer's old contents and ahead of the kernels that read
// the new: the host never waits. Backend.pageable restores the old path.
func (b *Backend) upload(role metaRole, op string, data []byte) devPtr {
	m := &b.meta[role]
	n := int64(len(data))
	if m.ptr != 0 && bytes.Equal(m.host, data) {
		return m.ptr
	}
	m.reserve(op, n)
	if n > 0 {
		if b.pageable {
			check(op, devHtoD(m.ptr, unsafe.Pointer(&data[0]), n))
		} else {
			check(op, devHtoDAsync(m.ptr, b.stage.put(op, data), n))
		}
	}
	m.host = append(m.host[:0], data...)
	return m.ptr
}

// staging is a pinned (page-locked) host buffer that metadata passes
// through on its way to the device. Only from pinned memory can a copy run
// asynchronously, and only once the copy has run may its bytes be
// overwritten: so the buffer is filled front to back, and starts over only
// when the stream is known to be idle (after a synchronize, or a copy to
// the host, which waits for everything queued before it). A step between
// two such points uses a few KB; when the buffer fills up anyway, put waits
// for the stream and starts over, or grows the buffer.
type staging struct {
	base      unsafe.Pointer // pinned host memory (driver_cu.go: cuMemHostAlloc)
	cap, used int64
	first     int64 // the first size, if not stagingMin (tests make it small)
}

// stagingMin is the staging buffer's first size; stagingAlign keeps every
// staged copy 256-byte aligned, as the device buffers are.
const (
	stagingMin   = 64 << 10
	stagingAlign = 256
)

// put copies data into the staging buffer and returns where; the caller
// holds the lock and queues the copy to the device.
func (s *staging) put(op string, data []byte) unsafe.Pointer {
	n := (int64(len(data)) + stagingAlign - 1) / stagingAlign * stagingAlign
	if s.used+n > s.cap {
		check(op, devSync()) // every copy out of the buffer has run
		s.used = 0
		if n > s.cap {
			first := cmp.Or(s.first, stagingMin)
			size := max(n, 2*s.cap, first)
			s.release()
			s.first = first
			p, err := hostAlloc(size)
			check(op, err)
			s.base, s.cap = p, size
		}
	}
	p := unsafe.Add(s.base, s.used)
	copy(unsafe.Slice((*byte)(p), len(data)), data)
	s.used += n
	return p
}

// idle records that every queued copy has run, so the buffer can be reused
// from its start.
func (s *staging) idle() { s.used = 0 }

// release frees the buffer (the caller has waited for the stream, or is
// about to: hostFree waits for it).
func (s *staging) release() {
	if s.base != nil {
		_ = hostFree(s.base)
	}
	*s = staging{}
}

// reserve makes m at least n bytes long, discarding its contents.
func (m *metaBuf) reserve(op string, n int64) {
	if m.ptr != 0 && m.cap >= n {
		return
	}
	if m.ptr != 0 {
		check(op, devSync()) // a queued kernel may still read the old buffer
		check(op, devFree(m.ptr))
	}
	size := max(n, 2*m.cap, 256)
	p, err := devAlloc(size)
	check(op, err)
	m.ptr, m.cap, m.host = p, size, m.host[:0]
}

// scratch returns a device buffer of at least n bytes that only kernels
// read and write.
func (m *metaBuf) scratch(op string, n int64) devPtr {
	m.reserve(op, n)
	return m.ptr
}

func (m *metaBuf) release() {
	if m.ptr != 0 {
		_ = devFree(m.ptr)
	}
	*m = metaBuf{}
}

// int32Bytes views s as bytes, without copying.
func int32Bytes(s []int32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// float32Bytes views s as bytes, without copying.
func float32Bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// Kernel arguments. Every kernel parameter is 8 bytes wide on both sides
// (gorgonia.org/cu's Function.Launch, which the backend first used, copies 8
// bytes from each argument pointer, and the convention stayed): device
// pointers, int64 counts, and float64 for scalars that the kernel narrows
// to float itself.

// maxKernelArgs is the most arguments a kernel takes (the attention
// kernels' 16).
const maxKernelArgs = 16

func ptrArg(t *Tensor) uint64   { return uint64(t.ptr) }
func devArg(p devPtr) uint64    { return uint64(p) }
func intArg(v int) uint64       { return uint64(int64(v)) }
func floatArg(v float32) uint64 { return math.Float64bits(float64(v)) }

// launch queues fn on grid×block threads with the given 8-byte arguments.
// The caller holds the lock (it has called enter).
func (b *Backend) launch(op string, fn kernelFn, gridX, gridY, block int, args ...uint64) {
	if gridX <= 0 || gridY <= 0 {
		return // nothing to do; the driver rejects empty grids
	}
	if gridY > 65535 {
		panic(fmt.Sprintf("cuda: %s: grid of %d×%d blocks exceeds the y limit", op, gridX, gridY))
	}
	copy(b.argv[:], args)
	if err := b.drv.launch(fn, gridX, gridY, block, b.argv[:len(args)]); err != nil {
		panic(launchFailure(op, fn.name, gridX, gridY, block, false, err))
	}
	if b.syncEach {
		wait := devSync
		if b.waitHook != nil {
			wait = b.waitHook
		}
		if err := wait(); err != nil {
			panic(launchFailure(op, fn.name, gridX, gridY, block, true, err))
		}
	}
}

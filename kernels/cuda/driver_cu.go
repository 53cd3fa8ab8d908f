//go:build cuda

package cuda

// The launch path and the pinned host memory call the driver directly:
// gorgonia.org/cu v0.9.6 wraps neither cuMemHostAlloc nor cuMemAllocHost,
// and its Function.Launch allocates two C arrays per launch (see
// driver.launch).

/*
#cgo LDFLAGS: -lcuda
#include <stdint.h>
#include <stdlib.h>
#include <cuda.h>

static CUresult kvlabLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned block, unsigned shared, void **argp) {
	return cuLaunchKernel(f, gx, gy, 1, block, 1, 1, shared, (CUstream)0, argp, NULL);
}

// kvlabAllowShared lets f launch with up to bytes of dynamic shared memory
// (beyond 48 KB a kernel must opt in) and asks for the largest shared
// memory carveout, so that two such blocks can share an SM.
static CUresult kvlabAllowShared(CUfunction f, int bytes) {
	CUresult r = cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
	if (r != CUDA_SUCCESS) return r;
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
}

static CUresult kvlabHostAlloc(void **p, size_t bytes) { return cuMemHostAlloc(p, bytes, 0); }
*/
import "C"

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"kvlab/kernels"
)

// minComputeMajor is the oldest GPU generation the kernels support: bf16
// tensor-core WMMA (src/matmul.cu) needs compute capability 8.0 (A100, RTX 30xx
// and later), and the PTX is generated for compute_80.
const minComputeMajor = 8

// driver is the CUDA driver state a Backend holds.
type driver struct {
	dev cu.Device
	ctx cu.CUContext

	// argv and argp are the kernel-argument arrays cuLaunchKernel reads,
	// in C memory allocated once: argp[i] points at argv[i].
	argv *C.uint64_t
	argp *unsafe.Pointer

	// leave is the backend's leave method as a func value, made once: enter
	// returns it, and a method value made at each call would be one heap
	// allocation per operation (enter is too large to inline, so the
	// closure escapes). TestLaunchAllocations counts this on a GPU.
	leave func()
}

// A cu.Function is a struct holding one CUfunction and nothing else;
// kernelFn.cfn reads it as one. This fails to compile if that changes.
var _ = [1]struct{}{}[unsafe.Sizeof(cu.Function{})-unsafe.Sizeof(C.CUfunction(nil))]

// cfn returns the driver's handle of the kernel.
func (k *kernelFn) cfn() C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&k.fn)) }

// allocArgs allocates the kernel-argument arrays.
func (d *driver) allocArgs() {
	d.argv = (*C.uint64_t)(C.malloc(C.size_t(8 * maxKernelArgs)))
	d.argp = (*unsafe.Pointer)(C.malloc(C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)) * maxKernelArgs)))
	argv := unsafe.Slice(d.argv, maxKernelArgs)
	argp := unsafe.Slice(d.argp, maxKernelArgs)
	for i := range argp {
		argp[i] = unsafe.Pointer(&argv[i])
	}
}

func (d *driver) freeArgs() {
	C.free(unsafe.Pointer(d.argv))
	C.free(unsafe.Pointer(d.argp))
	d.argv, d.argp = nil, nil
}

// kernelFn is a kernel loaded from the embedded PTX, with its name for
// error messages.
type kernelFn struct {
	fn     cu.Function
	name   string
	shared int // bytes of dynamic shared memory (functions.setShared)
}

// New returns a backend on the first CUDA device. It fails with an error
// wrapping ErrNoDevice when the driver found no GPU, and with a plain error
// when the GPU is older than compute capability 8.0 or the kernels do not
// load; it never exits the process.
func New() (kernels.Backend, error) {
	if err := driverInitError(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: counting devices: %v", ErrNoDevice, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the driver lists no device", ErrNoDevice)
	}
	dev := cu.Device(0)
	name, err := dev.Name()
	if err != nil {
		return nil, fmt.Errorf("cuda: device 0: %v", err)
	}
	major, err := dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %v", name, err)
	}
	minor, _ := dev.Attribute(cu.ComputeCapabilityMinor)
	sms, _ := dev.Attribute(cu.MultiprocessorCount)
	if major < minComputeMajor {
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; these kernels need %d.0 or newer (bf16 tensor cores)",
			name, major, minor, minComputeMajor)
	}

	b := &Backend{
		drv:      driver{dev: dev},
		desc:     fmt.Sprintf("%s (sm_%d%d, %d SMs, driver %d)", name, major, minor, sms, cu.Version()),
		sms:      max(1, sms),
		syncEach: os.Getenv(syncEnv) == "1",
		pageable: os.Getenv(pageableEnv) == "1",
	}
	// The primary context is the one the CUDA runtime (and so PyTorch) uses:
	// sharing it costs nothing and lets both live in one process.
	if b.drv.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("cuda: %s: creating a context: %v", name, err)
	}
	b.drv.leave = b.leave
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.drv.ctx); err != nil {
		return nil, fmt.Errorf("cuda: %s: %v", name, err)
	}
	start := time.Now()
	if err := b.fn.load(); err != nil {
		_ = dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	b.fn.setShared()
	for _, k := range b.fn.bigShared() {
		if r := C.kvlabAllowShared(k.cfn(), C.int(k.shared)); r != C.CUDA_SUCCESS {
			_ = dev.ReleasePrimaryCtx()
			return nil, fmt.Errorf("cuda: %s: kernel %s: allowing %d bytes of shared memory: %w", name, k.name, k.shared, driverError(int(r)))
		}
	}
	b.drv.allocArgs()
	// The first load on a machine JIT-compiles every module; later ones
	// read the driver's cache. Either way the time is worth a log line.
	b.desc += fmt.Sprintf(", kernels loaded in %v", time.Since(start).Round(time.Millisecond))
	return b, nil
}

// Close frees the metadata buffers and releases the device's primary
// context. Tensors must be freed first; the backend is unusable afterwards.
func (b *Backend) Close() error {
	defer b.enter()()
	b.releaseMeta()
	b.drv.freeArgs()
	return b.drv.dev.ReleasePrimaryCtx()
}

// enter takes the backend's lock and makes its context current on this OS
// thread; the returned function undoes both. Every method that touches the
// device starts with `defer b.enter()()`.
func (b *Backend) enter() func() {
	b.mu.Lock()
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(b.drv.ctx); err != nil {
		runtime.UnlockOSThread()
		b.mu.Unlock()
		panic(fmt.Sprintf("cuda: making the context current: %v", err))
	}
	return b.drv.leave
}

func (b *Backend) leave() {
	runtime.UnlockOSThread()
	b.mu.Unlock()
}

// load loads every embedded module into the current context and looks up
// every kernel. A PTX file without a table entry, or the reverse, is an
// error: it means the Go side and the src/*.cu sources have drifted apart.
func (f *functions) load() error {
	want := f.entries()
	files, err := ptxFiles.ReadDir("ptx")
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, de := range files {
		name := de.Name()
		mod := name[:len(name)-len(path.Ext(name))]
		kernels, ok := want[mod]
		if !ok {
			return fmt.Errorf("embedded %s has no entry in the kernel table", name)
		}
		src, err := ptxFiles.ReadFile("ptx/" + name)
		if err != nil {
			return err
		}
		m, err := loadPTX(name, src)
		if err != nil {
			return err
		}
		for _, k := range sortedKeys(kernels) {
			fn, err := m.Function(k)
			if err != nil {
				return fmt.Errorf("%s: kernel %s: %v", name, k, err)
			}
			kernels[k].fn, kernels[k].name = fn, k
		}
		seen[mod] = true
	}
	for _, mod := range sortedKeys(want) {
		if !seen[mod] {
			return fmt.Errorf("ptx/%s.ptx is not embedded; run `make kernels`", mod)
		}
	}
	return nil
}

// jitLogBytes is the size of each of the JIT compiler's log buffers.
const jitLogBytes = 16 << 10

// loadPTX loads one PTX module into the current context. The driver
// JIT-compiles the PTX for this GPU here (and caches the result on disk, so
// later runs start faster); when it fails, its error log says why (ptxas's
// own messages: an unsupported instruction, too many registers, ...), so the
// error carries both logs and the time the attempt took.
//
// The wall time is measured here rather than asked of the driver:
// CU_JIT_WALL_TIME is an output option that the driver writes into the
// option-values array, which gorgonia.org/cu v0.9.6's LoadDataEx builds and
// discards itself, so its JITWallTime.Result would always read 0. The log
// buffers are written through their pointers and arrive intact.
func loadPTX(name string, src []byte) (cu.Module, error) {
	errLog, infoLog := make([]byte, jitLogBytes), make([]byte, jitLogBytes)
	start := time.Now()
	m, err := cu.LoadDataEx(string(src),
		&cu.JITErrorLogBuffer{Buffer: errLog},
		&cu.JITInfoLogBuffer{Buffer: infoLog},
		&cu.JITLogVerbose{Enabled: true},
	)
	wall := time.Since(start)
	runtime.KeepAlive(errLog) // the driver held raw pointers to both
	runtime.KeepAlive(infoLog)
	if err != nil {
		return m, ptxLoadError(name, err, errLog, infoLog, wall)
	}
	return m, nil
}

// launch queues kernel k on the legacy default stream with the 8-byte
// arguments args. gorgonia.org/cu's Function.Launch would C.malloc and free
// two arrays on every call (cgo may not pass Go memory holding Go pointers);
// here the arrays are allocated once, in C memory, and only the values are
// copied in: one cgo call, no allocation.
func (d *driver) launch(k kernelFn, gridX, gridY, block int, args []uint64) error {
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(d.argv)), maxKernelArgs), args)
	if r := C.kvlabLaunch(k.cfn(), C.uint(gridX), C.uint(gridY), C.uint(block), C.uint(k.shared), d.argp); r != C.CUDA_SUCCESS {
		return driverError(int(r))
	}
	return nil
}

// Device memory. The callers hold the backend's lock, so the context is
// current on this thread.

func devAlloc(bytes int64) (devPtr, error) {
	p, err := cu.MemAlloc(bytes)
	return devPtr(p), err
}

func devFree(p devPtr) error { return cu.MemFree(cu.DevicePtr(p)) }

// devZero clears bytes (a multiple of 4) at p, asynchronously like a kernel.
func devZero(p devPtr, bytes int64) error { return cu.MemsetD32(cu.DevicePtr(p), 0, bytes/4) }

// devHtoD copies from pageable host memory. It first waits for the kernels
// queued before it, and returns once src may be reused.
func devHtoD(dst devPtr, src unsafe.Pointer, bytes int64) error {
	return cu.MemcpyHtoD(cu.DevicePtr(dst), src, bytes)
}

// devDtoH waits for the kernels queued before it, then copies.
func devDtoH(dst unsafe.Pointer, src devPtr, bytes int64) error {
	return cu.MemcpyDtoH(dst, cu.DevicePtr(src), bytes)
}

// devHtoDAsync queues a copy from pinned host memory on the legacy default
// stream and returns at once; src must stay unchanged until the copy has
// run (see staging).
func devHtoDAsync(dst devPtr, src unsafe.Pointer, bytes int64) error {
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), src, bytes, cu.Stream{})
}

// hostAlloc returns bytes of pinned (page-locked) host memory.
func hostAlloc(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.kvlabHostAlloc(&p, C.size_t(bytes)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("pinning %d bytes of host memory: %w", bytes, driverError(int(r)))
	}
	return p, nil
}

// hostFree waits for the copies that may still read p, then frees it.
func hostFree(p unsafe.Pointer) error {
	if err := devSync(); err != nil {
		return err
	}
	return cu.MemFreeHost(p)
}

func devSync() error { return cu.Synchronize() }

//go:build cuda

package cuda

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
}

// kernelFn is a kernel loaded from the embedded PTX, with its name for
// error messages.
type kernelFn struct {
	fn   cu.Function
	name string
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
	}
	// The primary context is the one the CUDA runtime (and so PyTorch) uses:
	// sharing it costs nothing and lets both live in one process.
	if b.drv.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("cuda: %s: creating a context: %v", name, err)
	}
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
	return b.leave
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

// launch queues the kernel on the legacy default stream. cu copies 8 bytes
// from each argument pointer.
func (k kernelFn) launch(gridX, gridY, block int, argp []unsafe.Pointer) error {
	return k.fn.Launch(gridX, gridY, 1, block, 1, 1, 0, cu.Stream{}, argp)
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

func devSync() error { return cu.Synchronize() }

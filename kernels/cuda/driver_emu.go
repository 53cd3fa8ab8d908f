//go:build cudaemu && !cuda

package cuda

// The cudaemu build runs the backend on a CPU emulator of the kernels
// (emu/emulator.cc, which compiles src/*.cu unchanged against the small
// CUDA stand-in beside it in emu/; emulator.cc here only includes it). It
// needs a C++20 compiler and no CUDA at all, so the kernels' indexing,
// masking and reductions, and every line of Go that prepares their
// launches, can be tested on any machine:
//
//	go test -tags cudaemu ./kernels/cuda/
//
// It is far too slow to serve a model, and it says nothing about the GPU
// itself; see emu/cuda_emu.h for what it cannot show.

/*
#cgo CXXFLAGS: -std=c++20 -O2 -pthread -Wno-unknown-pragmas -I${SRCDIR}/emu
#cgo LDFLAGS: -pthread
#include <stdint.h>
#include <stdlib.h>

int emu_kernel(const char *name);
int emu_launch(int k, int gx, int gy, int block, int shared, const uint64_t *args, int nargs);
uint64_t emu_alloc(uint64_t bytes);
void emu_free(uint64_t p);
void emu_zero(uint64_t p, uint64_t bytes);
void emu_htod(uint64_t dst, const void *src, uint64_t bytes);
void emu_dtoh(void *dst, uint64_t src, uint64_t bytes);
*/
import "C"

import (
	"embed"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"kvlab/kernels"
)

// emulatedSources is never read. The go command does not know .cu files,
// nor files of another folder that a .cc file includes, so it would not
// rebuild emulator.cc when a kernel or the emulator changes; embedding them
// makes their contents part of the package's build inputs, so an edited
// kernel is always the one the tests run.
//
//go:embed src/*.cu src/*.cuh emu/*.h emu/*.cc
var emulatedSources embed.FS

// driver is empty: the emulator has no device or context.
type driver struct{}

// kernelFn is an emulated kernel, by its index in emu/emulator.cc's table, with
// its name for error messages.
type kernelFn struct {
	id     C.int
	name   string
	shared int // bytes of dynamic shared memory (functions.setShared)
}

// New returns the backend on the CPU emulator. It never fails for want of a
// GPU; it fails only if a kernel the backend needs is missing from the
// emulator.
func New() (kernels.Backend, error) {
	b := &Backend{
		desc:     "CPU emulator of the CUDA kernels (cudaemu build; no GPU)",
		sms:      4,
		syncEach: os.Getenv(syncEnv) == "1",
		pageable: os.Getenv(pageableEnv) == "1",
	}
	for mod, ks := range b.fn.entries() {
		for name, fn := range ks {
			cs := C.CString(name)
			fn.id, fn.name = C.emu_kernel(cs), name
			C.free(unsafe.Pointer(cs))
			if fn.id < 0 {
				return nil, fmt.Errorf("cuda: emulator lacks kernel %s of src/%s.cu", name, mod)
			}
		}
	}
	b.fn.setShared()
	return b, nil
}

// Close frees the metadata buffers.
func (b *Backend) Close() error {
	defer b.enter()()
	b.releaseMeta()
	return nil
}

// enter takes the backend's lock; the returned function releases it.
func (b *Backend) enter() func() {
	b.mu.Lock()
	return b.mu.Unlock
}

// launch runs the kernel to completion, after the copies queued before it:
// the emulator is synchronous. args is the backend's argument array, Go
// memory without pointers, which C may read during the call.
func (d *driver) launch(k kernelFn, gridX, gridY, block int, args []uint64) error {
	flush()
	var first *C.uint64_t
	if len(args) > 0 {
		first = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	if C.emu_launch(k.id, C.int(gridX), C.int(gridY), C.int(block), C.int(k.shared), first, C.int(len(args))) != 0 {
		return fmt.Errorf("emulator refused a launch of %d×%d blocks of %d threads with %d arguments and %d bytes of shared memory",
			gridX, gridY, block, len(args), k.shared)
	}
	return nil
}

// The emulator's stream. A copy from pinned memory (devHtoDAsync) is not
// done when it is queued but just before the next operation that would
// follow it on a GPU's stream: a launch, a copy, a clear, a free, a
// synchronize. So a staging buffer overwritten before its copy ran would
// hand the emulated kernels the wrong bytes, as it would a GPU's.
var stream struct {
	sync.Mutex
	queued []asyncCopy // kept across flushes: no allocation once grown
}

type asyncCopy struct {
	dst   devPtr
	src   unsafe.Pointer // C memory (hostAlloc)
	bytes int64
}

// flush performs the queued copies in order.
func flush() {
	stream.Lock()
	defer stream.Unlock()
	for _, c := range stream.queued {
		C.emu_htod(C.uint64_t(c.dst), c.src, C.uint64_t(c.bytes))
	}
	stream.queued = stream.queued[:0]
}

func devHtoDAsync(dst devPtr, src unsafe.Pointer, bytes int64) error {
	stream.Lock()
	defer stream.Unlock()
	stream.queued = append(stream.queued, asyncCopy{dst, src, bytes})
	return nil
}

// Pinned host memory is C memory here: what matters is that it is not Go
// memory, which a queued copy could not hold on to.
func hostAlloc(bytes int64) (unsafe.Pointer, error) {
	p := C.malloc(C.size_t(bytes))
	if p == nil {
		return nil, fmt.Errorf("out of host memory for %d bytes", bytes)
	}
	return p, nil
}

func hostFree(p unsafe.Pointer) error { flush(); C.free(p); return nil }

func devAlloc(bytes int64) (devPtr, error) {
	p := C.emu_alloc(C.uint64_t(bytes))
	if p == 0 {
		return 0, fmt.Errorf("out of host memory for %d bytes", bytes)
	}
	return devPtr(p), nil
}

func devFree(p devPtr) error { flush(); C.emu_free(C.uint64_t(p)); return nil }

func devZero(p devPtr, bytes int64) error {
	flush()
	C.emu_zero(C.uint64_t(p), C.uint64_t(bytes))
	return nil
}

func devHtoD(dst devPtr, src unsafe.Pointer, bytes int64) error {
	flush()
	C.emu_htod(C.uint64_t(dst), src, C.uint64_t(bytes))
	return nil
}

func devDtoH(dst unsafe.Pointer, src devPtr, bytes int64) error {
	flush()
	C.emu_dtoh(dst, C.uint64_t(src), C.uint64_t(bytes))
	return nil
}

func devSync() error { flush(); return nil }

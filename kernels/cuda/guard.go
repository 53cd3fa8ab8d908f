//go:build cuda

package cuda

// gorgonia.org/cu calls cuInit in its package init and, if that fails,
// prints a line and calls os.Exit(1). Package initialisation runs before
// main, so a binary that merely links this backend would die on a machine
// without a GPU, even when the user asked for the CPU backend, and would
// never get the chance to explain why.
//
// The definition of cuInit below is linked into the executable, and a
// symbol defined in the executable takes precedence over the same symbol in
// a shared library, so gorgonia.org/cu's call lands here. It calls the
// driver's real cuInit (found with dlsym(RTLD_NEXT, ...): the next
// definition in load order, libcuda.so.1's), records the result, and
// reports success, which lets the process start. New then checks the
// recorded result before touching the driver and turns a failure into an
// ordinary error. Nothing else in the process calls the driver, so the
// "success" that gorgonia.org/cu was told is never relied upon.

/*
#cgo linux CFLAGS: -I/usr/local/cuda/include
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <cuda.h>

#ifndef RTLD_NEXT
#define RTLD_NEXT ((void *)-1l) // glibc's value, for headers that hide it without _GNU_SOURCE
#endif

static int kvlabInitCalled;
static CUresult kvlabInitResult;

CUresult CUDAAPI cuInit(unsigned int flags) {
	CUresult (*real)(unsigned int) = (CUresult (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
	kvlabInitCalled = 1;
	kvlabInitResult = real != NULL ? real(flags) : CUDA_ERROR_NOT_FOUND;
	return CUDA_SUCCESS;
}

// kvlabInitStatus returns the real cuInit's result, or -1 if it never ran.
static int kvlabInitStatus(void) { return kvlabInitCalled ? (int)kvlabInitResult : -1; }

// kvlabErrorText describes a driver result code; the driver answers this
// even when it failed to initialise.
static const char *kvlabErrorText(int r, int name) {
	const char *s = NULL;
	if (name) cuGetErrorName((CUresult)r, &s);
	else cuGetErrorString((CUresult)r, &s);
	return s != NULL ? s : "unknown error";
}
*/
import "C"

import "fmt"

// driverInitError returns nil if the CUDA driver initialised, and otherwise
// an error wrapping ErrNoDevice that says what the driver reported.
func driverInitError() error {
	r := int(C.kvlabInitStatus())
	switch r {
	case 0:
		return nil
	case -1:
		return fmt.Errorf("%w: the CUDA driver was never initialised", ErrNoDevice)
	}
	name := C.GoString(C.kvlabErrorText(C.int(r), 1))
	text := C.GoString(C.kvlabErrorText(C.int(r), 0))
	return fmt.Errorf("%w: the CUDA driver reports %q (%s); check that nvidia-smi lists a GPU",
		ErrNoDevice, text, name)
}

// driverError describes a driver result code, for the calls the backend
// makes without gorgonia.org/cu (driver_cu.go).
func driverError(r int) error {
	return fmt.Errorf("%s (%s)", C.GoString(C.kvlabErrorText(C.int(r), 1)), C.GoString(C.kvlabErrorText(C.int(r), 0)))
}

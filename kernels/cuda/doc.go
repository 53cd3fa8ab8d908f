// Package cuda implements kernels.Backend on an NVIDIA GPU: tensors live in
// device memory, and every operation is a kernel of our own, written in CUDA
// C++ (one .cu file per kernel, each opening with what it computes, its
// launch shape and the test that checks it), compiled to PTX by
// `make kernels`, embedded in the binary and launched through the CUDA
// driver API via gorgonia's cu package. No cuBLAS, no cuDNN: the kernels are the
// lesson, and the binary needs nothing but the NVIDIA driver.
//
// # Layout
//
//	src/          the kernels: *.cu and common.cuh; read these first
//	ptx/          the PTX that `make kernels` generates from src/, committed,
//	              with SOURCES.sha256 (checked by TestPTXMatchesSources)
//	emu/          the CPU emulator: a stand-in for the CUDA headers
//	              (cuda_emu.h, mma.h, cuda_bf16.h, ...) and emulator.cc, which
//	              runs src/*.cu on coroutines
//	emulator.cc   one #include of emu/emulator.cc: cgo compiles only the C
//	              and C++ files of the package's own folder, so the
//	              emulator's translation unit has to be named here
//	*.go          the launch code, package cuda, for all three builds
//
// # Build tags
//
// The backend is compiled only with `-tags cuda`. It needs cgo and the
// CUDA 11.x or 12.x headers to build (gorgonia's cu package does not compile
// against CUDA 13's), and a tagged binary needs the driver's libcuda.so.1
// to start at all. Without the tag this package is a stub whose New reports
// ErrNotBuilt, so that a command can always offer `--device cuda` and say
// clearly why it is unavailable.
//
// With `-tags cudaemu` the same backend runs on a CPU emulator of the
// kernels (emu/emulator.cc compiles src/*.cu unchanged with the host C++
// compiler), so that the kernels and the Go that launches them are tested
// on machines without a GPU or CUDA: `go test -tags cudaemu ./kernels/cuda/`.
//
// # A machine without a GPU
//
// gorgonia's cu package initialises the driver in its package init and, when that
// fails, prints a message and exits the process before main runs: a tagged
// binary would die on a GPU-less machine even when asked for the CPU. This
// package interposes the driver's cuInit (see guard.go) so that the failure
// is recorded instead, and New returns it as an error wrapping ErrNoDevice.
// What it cannot change: if libcuda.so.1 itself is missing, the dynamic
// loader refuses to start a tagged binary, before any Go code runs.
//
// # Numerics
//
// The GPU backend is held to tolerances against the CPU backend: matrix
// products round their inputs to bfloat16 (relative error around 1e-2 of
// the products' scale), every other kernel agrees to about 1e-5. The tests
// state each tolerance. Its matrix products are batch invariant, like the
// CPU backend's: every matmul kernel sums each output element in one order
// fixed by the product's shape (see src/matmul.cu), so a row's result does not
// depend on the rows computed with it.
package cuda

import "errors"

// ErrNotBuilt is returned by New in a binary built without the cuda tag.
var ErrNotBuilt = errors.New("cuda: this binary was built without CUDA support; rebuild with `-tags cuda` (see docs/gpu.md)")

// ErrNoDevice is wrapped by the error New returns when the driver is present
// but reports no usable GPU.
var ErrNoDevice = errors.New("cuda: no usable CUDA device")

//go:build !amd64 || purego

package cpu

// Without the amd64 assembly (another architecture, or the purego build
// tag), MatMulT runs goKernels: the same order of operations, in Go.

// avx2Kernels and avx512Kernels are goKernels here, so tests can name
// every set on any architecture.
var avx2Kernels, avx512Kernels = goKernels, goKernels

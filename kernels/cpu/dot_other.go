//go:build !amd64 || purego

package cpu

// Without the amd64 assembly (another architecture, or the purego build
// tag), MatMulT runs goKernels, the same order of operations in Go, or on
// arm64 neonKernels (dot_arm64.go) unless the purego tag is set.

// amxKernels, avx2Kernels and avx512Kernels are goKernels here, so tests
// can name every set on any architecture.
var amxKernels, avx2Kernels, avx512Kernels = goKernels, goKernels, goKernels

//go:build !arm64 || purego

package cpu

// Without the arm64 assembly (another architecture, or the purego build
// tag), neonKernels is goKernels, so tests can name every set on any
// architecture.
var neonKernels = goKernels

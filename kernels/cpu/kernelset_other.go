//go:build (!amd64 && !arm64) || purego

package cpu

// cpuKernelSets returns the kernel sets this build runs: the Go kernels
// alone (another architecture, or the purego build tag).
func cpuKernelSets() []*kernelSet { return []*kernelSet{&goKernels} }

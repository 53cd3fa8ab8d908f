package cpu

// KernelSet names the kernel set MatMulT and attention run on this
// machine, chosen once at start-up: "avx512" or "avx2" on amd64 CPUs that
// have those instructions (dot_amd64.go), "neon" on arm64 (dot_arm64.go),
// and "go" for the portable Go kernels (another architecture, an amd64 CPU
// without AVX2 and FMA, or a build with the purego tag). Every set gives
// the same bits; they differ only in speed.
func KernelSet() string { return kern.name }

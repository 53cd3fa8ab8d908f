package cpu

import (
	"fmt"
	"slices"
	"strings"
)

// KernelSet names the kernel set MatMulT and attention run in this
// process, chosen once at start-up: by default the fastest this CPU runs —
// "avx512" or "avx2" on amd64 CPUs that have those instructions
// (amx_amd64.go, dot_amd64.go), "neon" on arm64 (dot_arm64.go), and "go"
// for the portable Go kernels (another architecture, an amd64 CPU without
// AVX2 and FMA, or a build with the purego tag). Every set gives the same
// bits; they differ only in speed.
//
// "amx" (amx_amd64.go), on Xeons with AMX, is never the default: it runs
// bf16 products (bf16 weights with -bf16-dot on) on AMX tiles, several
// times faster for a prompt and slower for a single sequence's decode.
// AMX adds in an order of its own, so those products follow amxdot.go's
// definition instead of bf16dot.go's, the same for every row of the
// process; everything else amx computes is avx512's.
//
// The environment variable KVLAB_KERNEL_SET, when set, names the set to
// run instead (amx, avx512, avx2, neon or go), e.g. KVLAB_KERNEL_SET=avx2 to
// measure on an AVX-512 machine what a learner's AVX2 laptop runs, or
// KVLAB_KERNEL_SET=go for the portable kernels. A set this CPU cannot run,
// or an unknown name, makes the process panic at start-up with a message
// naming the sets it can run: there is no silent fallback.
func KernelSet() string { return kern.name }

// kernelSetEnv is the environment variable that picks the kernel set.
const kernelSetEnv = "KVLAB_KERNEL_SET"

// kernelSetNames are the names of every kernel set on any machine, fastest
// first.
var kernelSetNames = []string{"amx", "avx512", "avx2", "neon", "go"}

// chooseKernelSet returns the set of runnable named want, or the last
// (fastest) that is not opt-in when want is empty. It fails for a name
// that is not a kernel set, or one this CPU cannot run.
func chooseKernelSet(runnable []*kernelSet, want string) (*kernelSet, error) {
	if want == "" {
		return defaultKernelSet(runnable), nil
	}
	for _, ks := range runnable {
		if ks.name == want {
			return ks, nil
		}
	}
	var names []string
	for _, ks := range runnable {
		names = append(names, ks.name)
	}
	runs := fmt.Sprintf("this CPU runs %s (unset %s for the default, %s)",
		strings.Join(names, ", "), kernelSetEnv, defaultKernelSet(runnable).name)
	if !slices.Contains(kernelSetNames, want) {
		return nil, fmt.Errorf("cpu: %s=%q is not a kernel set (the sets are %s); %s",
			kernelSetEnv, want, strings.Join(kernelSetNames, ", "), runs)
	}
	return nil, fmt.Errorf("cpu: %s=%s: this CPU cannot run the %s kernels; %s", kernelSetEnv, want, want, runs)
}

// defaultKernelSet is the last of runnable that is not opt-in.
func defaultKernelSet(runnable []*kernelSet) *kernelSet {
	for i := len(runnable) - 1; i > 0; i-- {
		if !runnable[i].optIn {
			return runnable[i]
		}
	}
	return runnable[0]
}

// chooseKernelSetOrPanic is chooseKernelSet at start-up: a kernel set
// that was asked for and cannot run stops the process before anything
// is computed with another.
func chooseKernelSetOrPanic(runnable []*kernelSet, want string) *kernelSet {
	ks, err := chooseKernelSet(runnable, want)
	if err != nil {
		panic(err.Error())
	}
	return ks
}

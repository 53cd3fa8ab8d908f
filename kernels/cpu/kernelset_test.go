package cpu

import (
	"os"
	"testing"
)

// TestKernelSet checks that KernelSet names the set MatMulT runs, the last
// of runnable, and, where KVLAB_KERNEL_SET names the set a run expects
// (make test-arm64 sets it to neon), that this build runs that set: a
// build that fell back to the Go kernels would otherwise pass every
// comparison with itself.
func TestKernelSet(t *testing.T) {
	if KernelSet() != kern.name || runnable[len(runnable)-1].name != kern.name {
		t.Fatalf("KernelSet %q, kern %q, last runnable %q", KernelSet(), kern.name, runnable[len(runnable)-1].name)
	}
	t.Logf("kernel set: %s (of %d runnable)", KernelSet(), len(runnable))
	if want := os.Getenv("KVLAB_KERNEL_SET"); want != "" && KernelSet() != want {
		t.Fatalf("this build runs the %q kernels; KVLAB_KERNEL_SET wants %q", KernelSet(), want)
	}
}

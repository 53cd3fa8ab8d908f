package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// TestBF16DotFlag: -bf16-dot reaches the CPU backend where the kernel set
// has bf16 dot products, is refused with the reason where it has not, and
// is refused off the cpu backend; without it the backend multiplies in
// float32.
func TestBF16DotFlag(t *testing.T) {
	backend := func(args ...string) (*cpu.Backend, error) {
		var rf runtimeFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		rf.register(fs, Variant{Name: "t"})
		require.NoError(t, fs.Parse(args))
		be, err := rf.backend()
		if err != nil {
			return nil, err
		}
		return be.(*cpu.Backend), nil
	}
	be, err := backend()
	require.NoError(t, err)
	require.False(t, be.BF16Dot(), "bf16 products without the flag")

	be, err = backend("-bf16-dot")
	if cpu.BF16DotNative() {
		require.NoError(t, err)
		require.True(t, be.BF16Dot(), "-bf16-dot did not reach the backend")
	} else {
		require.ErrorContains(t, err, "needs AVX512-BF16")
	}

	_, err = backend("-bf16-dot", "-device", "cuda")
	require.ErrorContains(t, err, "-bf16-dot: bf16 products are the cpu backend's")
}

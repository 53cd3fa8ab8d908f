package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// parseBF16Dot registers the runtime flags on a fresh flag set and parses
// args, as every runnable does.
func parseBF16Dot(t *testing.T, args ...string) (*runtimeFlags, error) {
	t.Helper()
	var rf runtimeFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rf.register(fs, Variant{Name: "t"})
	return &rf, fs.Parse(args)
}

// TestBF16DotDecide: bf16 products are on by default exactly where the
// kernel set has the bf16 dot product and the backend is the CPU's; off
// by flag is off everywhere; on by flag is on where it can run and the
// error that says why everywhere else. Both answers of the CPU are
// tested, not just this machine's.
func TestBF16DotDecide(t *testing.T) {
	for _, tc := range []struct {
		flag    string // "" for the default
		device  string
		native  bool
		want    bool
		wantErr string
	}{
		{"", "cpu", true, true, ""},
		{"", "cpu", false, false, ""},
		{"", "cuda", true, false, ""},
		{"", "cuda", false, false, ""},
		{"-bf16-dot=auto", "cpu", true, true, ""},
		{"-bf16-dot=auto", "cpu", false, false, ""},
		{"-bf16-dot", "cpu", true, true, ""},
		{"-bf16-dot=on", "cpu", true, true, ""},
		{"-bf16-dot", "cpu", false, false, "needs AVX512-BF16"},
		{"-bf16-dot=true", "cpu", false, false, "test kernel set has no bf16 dot product"},
		{"-bf16-dot", "cuda", true, false, "-bf16-dot: bf16 products are the cpu backend's"},
		{"-bf16-dot=false", "cpu", true, false, ""},
		{"-bf16-dot=off", "cpu", true, false, ""},
		{"-bf16-dot=false", "cpu", false, false, ""},
		{"-bf16-dot=false", "cuda", true, false, ""},
	} {
		var args []string
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		rf, err := parseBF16Dot(t, args...)
		require.NoError(t, err, tc.flag)
		got, err := rf.bf16Dot.decide(tc.device, tc.native, "test")
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "%q on %s, native %v", tc.flag, tc.device, tc.native)
			continue
		}
		require.NoError(t, err, tc.flag)
		require.Equal(t, tc.want, got, "%q on %s, native %v", tc.flag, tc.device, tc.native)
	}
}

// TestBF16DotFlagValues: the flag reads what a user would type, the last
// one wins, a value that means nothing is refused, and -h shows auto as
// the default.
func TestBF16DotFlagValues(t *testing.T) {
	rf, err := parseBF16Dot(t, "-bf16-dot", "-bf16-dot=false")
	require.NoError(t, err)
	require.Equal(t, bf16DotOff, rf.bf16Dot)
	rf, err = parseBF16Dot(t, "-bf16-dot=0", "--bf16-dot=1")
	require.NoError(t, err)
	require.Equal(t, bf16DotOn, rf.bf16Dot)

	_, err = parseBF16Dot(t, "-bf16-dot=sometimes")
	require.ErrorContains(t, err, "want auto, true (on) or false (off)")

	rf, err = parseBF16Dot(t)
	require.NoError(t, err)
	require.Equal(t, "auto", rf.bf16Dot.String())
}

// TestBF16DotBackend: the backend the flags build multiplies in bf16 as
// the decision says, on this machine: by default where the CPU has the
// instruction, never with -bf16-dot=false, and with -bf16-dot only where
// it can.
func TestBF16DotBackend(t *testing.T) {
	backend := func(args ...string) (*cpu.Backend, error) {
		rf, err := parseBF16Dot(t, args...)
		require.NoError(t, err)
		be, err := rf.backend()
		if err != nil {
			return nil, err
		}
		return be.(*cpu.Backend), nil
	}
	be, err := backend()
	require.NoError(t, err)
	require.Equal(t, cpu.BF16DotNative(), be.BF16Dot(), "the default is the CPU's answer")

	be, err = backend("-bf16-dot=false")
	require.NoError(t, err)
	require.False(t, be.BF16Dot(), "bf16 products with -bf16-dot=false")

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

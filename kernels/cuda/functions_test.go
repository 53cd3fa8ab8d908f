//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPTXLoadError checks the error a failed module load carries: the
// driver's error, the wall time, and both JIT logs cut at their NUL.
func TestPTXLoadError(t *testing.T) {
	buf := func(s string) []byte {
		b := make([]byte, 128)
		copy(b, s)
		return b
	}
	cases := []struct {
		name          string
		errLog, info  []byte
		want, notWant []string
	}{
		{
			name:   "both logs",
			errLog: buf("ptxas fatal   : Unresolved extern function 'f'\n"),
			info:   buf("ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k'"),
			want: []string{
				"loading matmul.ptx: CUDA_ERROR_INVALID_PTX (after 1.5ms)",
				"JIT error log:\n    ptxas fatal   : Unresolved extern function 'f'",
				"JIT info log:\n    ptxas info    : 0 bytes gmem\n    ptxas info    : Compiling entry function 'k'",
			},
		},
		{
			name:   "a full buffer",
			errLog: []byte("ptxas error   : Entry function 'k' uses too much shared data"),
			info:   make([]byte, 8),
			want:   []string{"uses too much shared data\n    (log truncated)", "JIT info log: empty"},
		},
		{
			name:    "empty logs",
			errLog:  make([]byte, 16),
			info:    make([]byte, 16),
			want:    []string{"JIT error log: empty", "JIT info log: empty"},
			notWant: []string{"\x00"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ptxLoadError("matmul.ptx", errors.New("CUDA_ERROR_INVALID_PTX"), c.errLog, c.info, 1500*time.Microsecond)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, w := range c.notWant {
				assert.NotContains(t, err.Error(), w)
			}
		})
	}
}

// TestSyncModeNamesKernel plays a device fault in sync mode (a wait that
// fails after the launch) and checks that the panic names the operation and
// the kernel; without the fault, sync mode changes no result.
func TestSyncModeNamesKernel(t *testing.T) {
	be := needGPU(t)
	defer func(on bool) { be.syncEach, be.waitHook = on, nil }(be.syncEach)
	be.syncEach = true

	x := be.FromHost(1, 64, randFloats(newRand(41), 64, 1))
	w := be.FromHost(48, 64, randFloats(newRand(42), 48*64, 1))
	d := be.New(1, 48)
	defer func() { be.Free(x); be.Free(w); be.Free(d) }()
	be.MatMulT(d, x, w) // sync mode, no fault: runs as usual
	want := be.ToHost(d, make([]float32, 48))
	be.syncEach = false
	be.MatMulT(d, x, w)
	assert.Equal(t, want, be.ToHost(d, make([]float32, 48)), "sync mode changed a result")
	be.syncEach = true

	be.waitHook = func() error { return errors.New("CUDA_ERROR_ILLEGAL_ADDRESS") }
	for _, c := range []struct {
		name, kernel string
		run          func()
	}{
		{"MatMulT", "matmul_bf16_skinny", func() { be.MatMulT(d, x, w) }},
		{"Add", "add", func() { be.Add(d, d) }},
	} {
		msg := panicMessage(c.run)
		assert.Contains(t, msg, "cuda: "+c.name+": kernel "+c.kernel+" on ")
		assert.Contains(t, msg, "failed while running")
		assert.Contains(t, msg, "CUDA_ERROR_ILLEGAL_ADDRESS")
	}
}

// TestCheckSaysHowToFindAFault checks the hint an error from a waiting
// operation carries.
func TestCheckSaysHowToFindAFault(t *testing.T) {
	msg := panicMessage(func() { check("ToHost", errors.New("CUDA_ERROR_ILLEGAL_ADDRESS")) })
	assert.Contains(t, msg, "cuda: ToHost: CUDA_ERROR_ILLEGAL_ADDRESS")
	assert.Contains(t, msg, "KVLAB_CUDA_SYNC=1")
}

// panicMessage runs f and returns what it panicked with, or "" if it did not.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

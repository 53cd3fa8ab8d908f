//go:build cuda || cudaemu

package cuda

import (
	"errors"
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

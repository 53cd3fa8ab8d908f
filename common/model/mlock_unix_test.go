//go:build linux || darwin

package model

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"kvlab/kernels/cpu"
)

// TestMlockRefusedByLimit lowers RLIMIT_MEMLOCK below the model's size and
// checks that Load fails with a LockError naming the limit, leaving nothing
// mapped. A process allowed to lock any amount (CAP_IPC_LOCK, root) is not
// refused, and the test then has nothing to check.
func TestMlockRefusedByLimit(t *testing.T) {
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old))
	low := old
	low.Cur = 0
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low))
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) })

	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, tinySynth(ArchLlama, 12)))
	m, err := LoadWith(dir, cpu.New(), LoadOptions{Mlock: true})
	if err == nil {
		m.Close()
		t.Skip("this process may lock memory beyond RLIMIT_MEMLOCK")
	}
	var le *LockError
	require.True(t, errors.As(err, &le), "%v", err)
	assert.True(t, le.ByLimit)
	assert.Equal(t, int64(0), le.Limit)
	assert.Contains(t, err.Error(), "RLIMIT_MEMLOCK allows this process to lock 0 bytes")
	if lines := mappedFilesOrNil(dir); lines != nil {
		assert.Empty(t, lines, "a refused lock must not leave the checkpoint mapped")
	}
}

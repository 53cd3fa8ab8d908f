//go:build linux

package cachefile

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tornDirEnv tells the test binary, run again as a child, to write a block
// under a file-size limit into the directory it names.
const tornDirEnv = "KVLAB_TEST_TORN_WRITE_DIR"

// TestDiskTierWriteCutShortLeavesNoTornRecord: the writer writes a block's
// file under a temporary name, syncs it and renames it into place, so a
// write cut short leaves nothing under the block's name. Here a child
// process writes under a file-size limit (RLIMIT_FSIZE) that stops the
// write half way, as a full disk or a crash would: the block is dropped,
// not stored torn, and a tier opened on the directory afterwards finds no
// block and refuses none. A crash between the write and the rename leaves
// a temporary file; opening the tier removes it without indexing it, and
// the block, put again, is stored whole.
func TestDiskTierWriteCutShortLeavesNoTornRecord(t *testing.T) {
	bs := tierBlocks(tierID, tierSeed, 1, 70)
	if dir := os.Getenv(tornDirEnv); dir != "" {
		writeUnderALimit(t, dir, bs[0].KV)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskTierWriteCutShortLeavesNoTornRecord$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), tornDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child's write under the limit:\n%s", out)
	require.Contains(t, string(out), "the write was cut short", "the child ran:\n%s", out)

	sub := filepath.Join(dir, IdentityDir(tierID, tierSeed))
	left, err := os.ReadDir(sub)
	require.NoError(t, err)
	assert.Empty(t, names(left), "nothing under the block's name, nor a temporary file")
	d := openTier(t, dir, 10)
	assert.Zero(t, d.Stats().Blocks)
	assert.Zero(t, d.Stats().Corrupt, "nothing torn to refuse")
	assert.False(t, d.Has(bs[0].Hash))
	require.NoError(t, d.Close())

	// What a crash between the write and the rename leaves: half a block
	// file under a temporary name.
	whole := filepath.Join(t.TempDir(), "whole")
	fill(t, whole, 10, bs)
	raw, err := os.ReadFile(blockPath(whole, bs[0].Hash))
	require.NoError(t, err)
	crashed := filepath.Join(sub, ".kvcache-1234")
	require.NoError(t, os.WriteFile(crashed, raw[:len(raw)/2], 0o644))
	d = openTier(t, dir, 10)
	assert.NoFileExists(t, crashed, "the tier removes what a crash left")
	assert.Zero(t, d.Stats().Blocks)
	assert.Zero(t, d.Stats().Corrupt)
	d.Put(bs[0])
	require.NoError(t, d.Flush(hang))
	have, ok := d.Get(bs[0].Hash)
	require.True(t, ok)
	requireSameBlock(t, bs[0], have)
	t.Logf("a write cut short at half a block file left %d files; a crash's temporary file was removed, and the block stored whole (%d bytes)", len(left), d.FileBytes())
}

// writeUnderALimit is the child's side: it puts a block into a tier in dir
// while files may grow to half a block file, so the write stops part way
// (Go ignores the SIGXFSZ the kernel sends; the write returns EFBIG).
func writeUnderALimit(t *testing.T, dir string, kv []byte) {
	var was syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was))
	d := openTier(t, dir, 10)
	limit := uint64(d.FileBytes() / 2)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: was.Max}))
	b := tierBlocks(tierID, tierSeed, 1, 70)[0]
	require.Equal(t, kv, b.KV)
	d.Put(b)
	require.NoError(t, d.Flush(hang))
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was))
	s := d.Stats()
	require.Equal(t, 1, s.Dropped, "the block is dropped, not stored")
	require.False(t, d.Has(b.Hash))
	require.NoError(t, d.Close())
	t.Logf("the write was cut short at %d of %d bytes", limit, d.FileBytes())
}

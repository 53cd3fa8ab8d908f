package server

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// allocated returns the bytes fn allocates on the heap (the process's
// TotalAlloc over the call; the test runs nothing else meanwhile).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCacheFileSaveAndRestoreStream holds a save and a restore of a file of
// 400 blocks to what streaming allows. A save allocates under a
// quarter of the file's size: it writes through a fixed buffer, never
// building the file (it once built it twice), and lists the blocks first
// (kvcache.Observer.Blocks: 72 bytes a block and a pointer, beside the
// 8,321 bytes of a record here). A restore allocates under a
// quarter of the file on top of what kvcache.Pool.WriteBlock allocates for
// each layer of each block (the float32 copy it hands the backend, garbage
// one block at a time, measured here):
// it reads each block's KV from the file as it writes it, where it once
// read the whole file and decoded every block on the side.
func TestCacheFileSaveAndRestoreStream(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	// Blocks of 16 tokens: what a block costs besides its KV (its views,
	// its events, its tokens) is then small beside the KV, as with a real
	// model, whose blocks hold far more KV than this one's.
	cfg := engineConfig(true)
	cfg.BlockSize = 16
	src, file := observed(t, tm, cfg, path, "model-a")
	for i := range 50 {
		runOne(t, src, engine.Request{ID: i + 1, Prompt: prompt(128, int32(100+i)), MaxTokens: 1, IgnoreEOS: true})
	}

	var saved int
	var err error
	saveBytes := allocated(func() { saved, err = file.Save() })
	require.NoError(t, err)
	require.GreaterOrEqual(t, saved, 390, "enough blocks that buffers of fixed size are small beside the file")
	st, err := os.Stat(path)
	require.NoError(t, err)
	size := uint64(st.Size())

	dst, file := observed(t, tm, cfg, path, "model-a")
	var restored int
	restoreBytes := allocated(func() { restored, err = file.Restore() })
	require.NoError(t, err)
	require.Equal(t, saved, restored)
	require.NoError(t, dst.Pool().Audit().Err())
	// What WriteBlock itself allocates for one layer of one block, on a
	// pool of the same shape whose block 0 is free.
	spare, _ := observed(t, tm, cfg, path, "model-a")
	p := spare.Pool()
	k, v := make([]float32, p.BlockSize()*p.KVDim()), make([]float32, p.BlockSize()*p.KVDim())
	perWrite := allocated(func() {
		for range 100 {
			require.NoError(t, p.WriteBlock(0, 0, k, v))
		}
	}) / 100
	writeCopies := uint64(restored*p.Layers()) * perWrite

	t.Logf("file %d bytes, %d blocks: save allocated %d bytes (%.3f of the file), restore %d (%.3f of the file; WriteBlock's copies %d)",
		size, saved, saveBytes, float64(saveBytes)/float64(size), restoreBytes, float64(restoreBytes)/float64(size), writeCopies)
	assert.Less(t, saveBytes, size/4, "a save streams the file")
	assert.Less(t, restoreBytes, writeCopies+size/4, "a restore streams the file")
}

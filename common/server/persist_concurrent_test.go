package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

// hang bounds a wait that only a hang would run out: what it waits for
// takes milliseconds.
const hang = 10 * time.Second

// stallingWriter is a disk that stalls: its first Write waits until
// release is closed, after closing stuck.
type stallingWriter struct {
	w       io.Writer
	once    sync.Once
	stuck   chan struct{}
	release chan struct{}
}

func (s *stallingWriter) Write(p []byte) (int, error) {
	s.once.Do(func() {
		close(s.stuck)
		<-s.release
	})
	return s.w.Write(p)
}

// serve runs r to the end on e without the testing package, for another
// goroutine than the test's: it returns the first error of a step.
func serve(e *engine.Engine, r engine.Request) error {
	if err := e.Submit(r); err != nil {
		return err
	}
	for e.Busy() {
		for _, o := range e.Step() {
			if o.Err != nil {
				return o.Err
			}
		}
	}
	return nil
}

// TestCacheFileSaveNeverWaitsOnTheDisk: while a save's write to its file
// is stuck, as on a stalled disk, the engine still commits a new prompt
// and evicts cached blocks, both of which take the observer's lock. The
// save holds the lock only while it copies one block's KV, never across a
// write; a save that wrote under the lock would keep the engine waiting
// until the disk came back (here, until the test gives up and releases
// it). The file the save then finishes restores whole.
func TestCacheFileSaveNeverWaitsOnTheDisk(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	cfg := engineConfig(true)
	e, file := observed(t, tm, cfg, path, "model-a")
	for i := range 6 {
		runOne(t, e, engine.Request{ID: i + 1, Prompt: prompt(64, int32(10+i)), MaxTokens: 1, IgnoreEOS: true})
	}
	// The records must overflow the write buffer, so the first write to the
	// file comes in the middle of the walk, not at the final flush.
	require.Greater(t, file.Observer.Announced()*file.blockBytes(), 2*cachefile.BufferBytes)

	stuck, release := make(chan struct{}), make(chan struct{})
	file.testWriter = func(w io.Writer) io.Writer { return &stallingWriter{w: w, stuck: stuck, release: release} }
	type result struct {
		n   int
		err error
	}
	saved := make(chan result, 1)
	go func() {
		n, err := file.Save()
		saved <- result{n, err}
	}()
	select {
	case <-stuck:
	case <-time.After(hang):
		close(release)
		t.Fatal("the save never wrote to its file")
	}

	// The engine, meanwhile: a new prompt's commits, then evictions.
	fresh := prompt(16, 99)
	engineDone := make(chan error, 1)
	go func() {
		err := serve(e, engine.Request{ID: 100, Prompt: fresh, MaxTokens: 1, IgnoreEOS: true})
		if n := e.Pool().MatchLen("", fresh); err == nil && n != len(fresh) {
			err = fmt.Errorf("the new prompt's %d tokens were served, %d of them cached", len(fresh), n)
		}
		if err == nil && e.Pool().Cache().Evict(8) != 8 {
			err = errors.New("fewer than 8 blocks to evict")
		}
		engineDone <- err
	}()
	select {
	case err := <-engineDone:
		require.NoError(t, err)
	case <-time.After(hang):
		close(release)
		<-engineDone
		<-saved
		t.Fatalf("the engine waited %v for a save stuck writing its file: the observer's lock was held across the write", hang)
	}

	close(release)
	var r result
	select {
	case r = <-saved:
	case <-time.After(hang):
		t.Fatal("the save did not finish once its file was writable again")
	}
	require.NoError(t, r.err)
	require.Positive(t, r.n)
	require.NoError(t, e.Pool().Audit().Err())

	dst, restore := observed(t, tm, cfg, path, "model-a")
	restored, err := restore.Restore()
	require.NoError(t, err, "blocks evicted during the save are left out whole, chains and all")
	assert.Equal(t, r.n, restored)
	require.NoError(t, dst.Pool().Audit().Err())
}

// TestCacheFileSaveSkipsBlocksEvictedMidSave: a block evicted after the
// save listed the cached blocks and before it read the block's KV is left
// out, and so are its descendants, even when they are cached again by the
// time their turn comes (without their parent, a restore could not reach
// them). The rest is saved, the header counts exactly the records in the
// file, and the file restores with no error.
func TestCacheFileSaveSkipsBlocksEvictedMidSave(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	cfg := engineConfig(true)
	bs := cfg.BlockSize
	e, file := observed(t, tm, cfg, path, "model-a")
	hashes := func(p []int32) []kvevents.Hash { return file.Observer.Hasher().BlockHashes(p, bs, "") }
	// The save lists blocks by depth, and by hash within a depth: gone is
	// the prompt whose first block comes first.
	gone, kept := prompt(24, 5), prompt(24, 6)
	if bytes.Compare(hashes(gone)[0][:], hashes(kept)[0][:]) > 0 {
		gone, kept = kept, gone
	}
	goneRoot, keptRoot := hashes(gone)[0], hashes(kept)[0]
	runOne(t, e, engine.Request{ID: 1, Prompt: gone, MaxTokens: 1, IgnoreEOS: true})
	runOne(t, e, engine.Request{ID: 2, Prompt: kept, MaxTokens: 1, IgnoreEOS: true})

	// Before gone's first block is read, the engine evicts gone (the least
	// recently used prompt); before kept's, it serves gone again, so gone's
	// later blocks are cached once more when their turn comes.
	var read []kvevents.Hash
	file.testBeforeRead = func(b kvcache.CachedBlock) {
		read = append(read, b.Hash)
		switch b.Hash {
		case goneRoot:
			require.Equal(t, len(gone)/bs, e.Pool().Cache().Evict(len(gone)/bs))
			require.Zero(t, e.Pool().MatchLen("", gone), "the eviction took the prompt served first")
			require.Equal(t, len(kept), e.Pool().MatchLen("", kept))
		case keptRoot:
			runOne(t, e, engine.Request{ID: 3, Prompt: gone, MaxTokens: 1, IgnoreEOS: true})
			require.Equal(t, len(gone), e.Pool().MatchLen("", gone))
		}
	}
	n, err := file.Save()
	require.NoError(t, err)
	assert.Equal(t, len(kept)/bs, n, "kept's blocks, and none of gone's")
	assert.False(t, slices.Contains(read, hashes(gone)[1]), "gone's later blocks were left out without reading them")

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lead := len(cachefile.Magic) + 4
	hdrLen := int(binary.LittleEndian.Uint32(raw[len(cachefile.Magic):]))
	var hdr cachefile.Header
	require.NoError(t, json.Unmarshal(raw[lead:lead+hdrLen], &hdr))
	assert.Equal(t, n, hdr.Blocks)
	assert.Equal(t, lead+hdrLen+n*file.blockBytes()+32, len(raw), "the header's count is the records in the file")

	dst, restore := observed(t, tm, cfg, path, "model-a")
	restored, err := restore.Restore()
	require.NoError(t, err)
	assert.Equal(t, n, restored)
	require.NoError(t, dst.Pool().Audit().Err())
	_, _, cached := runOne(t, dst, engine.Request{ID: 10, Prompt: kept, MaxTokens: 1, IgnoreEOS: true})
	assert.Equal(t, len(kept)/bs*bs, cached, "the restored engine finds kept whole")
	_, _, cached = runOne(t, dst, engine.Request{ID: 11, Prompt: gone, MaxTokens: 1, IgnoreEOS: true})
	assert.Zero(t, cached, "and nothing of gone")
}

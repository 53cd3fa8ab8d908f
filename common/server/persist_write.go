package server

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"kvlab/common/cachefile"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

// errOverBudget is saveTo's error when the file would pass its limit.
var errOverBudget = errors.New("over the byte limit")

// saveTo writes the cached blocks keep accepts to path, in Save's format,
// and returns how many blocks and bytes it wrote. keep must refuse salted
// blocks (the file records no salt). A block keep accepts whose parent it
// refused is written all the same, and a restore leaves it out. limit, if
// positive, is the most bytes the file may take: past it the save stops,
// removes what it wrote and returns an error wrapping errOverBudget.
//
// The engine never waits on the disk: saveTo walks a snapshot of the
// blocks' metadata (kvcache.Observer.Blocks) and copies each block's KV
// into a buffer of one record under the observer's lock (Observer.Read),
// then writes the record with the lock released, so the engine's frees
// and commits wait for one block's copy at most. A block evicted since
// the snapshot is left out, and so are its descendants; the header counts
// the records written.
//
// The file is streamed, never built in memory: the records go to a
// temporary file through a buffer, behind a header padded to its longest
// length (JSON allows the trailing spaces), which is filled in with the
// block count once it is known; the checksum is then computed reading the
// file back, since it covers the header, and appended. The file is synced
// before its rename.
func (c *CacheFile) saveTo(path string, keep func(kvcache.CachedBlock) bool, limit int64) (blocks, size int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, want := c.Identity.DType, c.Pool.DType().Name(); have != want {
		return 0, 0, fmt.Errorf("the identity names KV of dtype %s, the pool holds %s", have, want)
	}
	// The header with a zero count, padded for the longest count there is.
	hdr, err := cachefile.MarshalHeader(c.Identity, c.Seed, 0)
	if err != nil {
		return 0, 0, err
	}
	hdrLen := len(hdr) + len(fmt.Sprint(math.MaxInt64)) - 1
	rec := int64(c.blockBytes())
	if limit > 0 && int64(cachefile.LeadBytes+hdrLen+sha256.Size) > limit {
		return 0, 0, fmt.Errorf("even an empty file (%d bytes) is %w of %d", cachefile.LeadBytes+hdrLen+sha256.Size, errOverBudget, limit)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), cachefile.TempPattern)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	var out io.Writer = tmp
	if c.testWriter != nil {
		out = c.testWriter(tmp)
	}
	w := bufio.NewWriterSize(out, cachefile.BufferBytes)
	w.Write(cachefile.AppendLead(nil, hdrLen))
	w.WriteString(strings.Repeat(" ", hdrLen))
	written := int64(cachefile.LeadBytes + hdrLen)
	// One scratch for every block's rows: a save allocates per file, not per block.
	scratch := make([]float32, 2*c.Pool.BlockSize()*c.Pool.KVDim())
	record := make([]byte, 0, rec)
	// lost holds the blocks evicted since the snapshot and their
	// descendants, which are left out with them: a chain whose first
	// blocks are not in the file could not be restored.
	var lost map[kvevents.Hash]bool
	for _, b := range c.Observer.Blocks() {
		if !keep(b) {
			continue
		}
		if b.Parent != nil && lost[*b.Parent] {
			lost[b.Hash] = true
			continue
		}
		if c.testBeforeRead != nil {
			c.testBeforeRead(b)
		}
		record = cachefile.AppendRecordHead(record[:0], b.Hash, b.Parent, b.Tokens)
		// Only the copy of the block's KV holds the observer's lock: the
		// engine's frees and commits wait for one block's copy, never for
		// the disk.
		var ok bool
		ok, err = c.Observer.Read(b, func(block int32) error {
			for l := range c.Identity.Layers {
				record = c.Pool.AppendBlock(record, l, block, scratch)
			}
			return nil
		})
		if err != nil {
			break
		}
		if !ok {
			if lost == nil {
				lost = make(map[kvevents.Hash]bool)
			}
			lost[b.Hash] = true
			continue
		}
		if limit > 0 && written+rec+sha256.Size > limit {
			err = fmt.Errorf("the file would pass %d bytes after %d blocks: %w of %d", written+rec+sha256.Size, blocks, errOverBudget, limit)
			break
		}
		if _, err = w.Write(record); err != nil {
			break
		}
		written += rec
		blocks++
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return 0, 0, err
	}
	hdr, err = cachefile.MarshalHeader(c.Identity, c.Seed, blocks)
	if err != nil {
		return 0, 0, err
	}
	if _, err = tmp.WriteAt(hdr, int64(cachefile.LeadBytes)); err != nil {
		return 0, 0, err
	}
	h := sha256.New()
	if _, err = io.CopyBuffer(h, io.NewSectionReader(tmp, 0, written), make([]byte, cachefile.BufferBytes)); err != nil {
		return 0, 0, err
	}
	if _, err = tmp.WriteAt(h.Sum(nil), written); err != nil {
		return 0, 0, err
	}
	if err = tmp.Sync(); err != nil {
		return 0, 0, err
	}
	if err = tmp.Close(); err != nil {
		return 0, 0, err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return 0, 0, err
	}
	return blocks, int(written + sha256.Size), nil
}

// RemoveStaleTemps removes the temporary files a save left in dir when the
// process died before its rename (a save's own is removed on any error),
// and returns their names (cachefile.RemoveStaleTemps). Call it before
// anything saves into dir.
func RemoveStaleTemps(dir string) ([]string, error) { return cachefile.RemoveStaleTemps(dir) }

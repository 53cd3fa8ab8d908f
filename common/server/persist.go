package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"kvlab/common/cachefile"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

// CacheFile is the persistent tier, the analogue of llama-server's slot
// save and restore: Save writes every block the prefix cache holds — its
// tokens and its KV in every layer — to one file, and Restore puts them
// back into an empty pool through the Pool API (open a sequence, write the
// saved KV into its blocks, commit, release), so it works with every cache
// design.
//
// The file is package cachefile's format ("KVLABKV1": a JSON header with
// the CacheIdentity and the block count, which Save pads with trailing
// spaces, one record per block, parents before children, and a SHA-256
// trailer), the one cachefile.DiskTier writes each block in.
//
// A file is refused whole — the server then starts with an empty cache —
// when its checksum fails (corrupt or truncated), when it was written for
// another model, block size, layout or dtype (its KV would be garbage
// here), or when a record's hash is not the hash of its tokens. Every
// count in it is checked against the bytes there are before anything is
// allocated for it (scan), and neither a save nor a restore holds the file
// in memory (saveTo, commit).
type CacheFile struct {
	Path     string
	Identity CacheIdentity
	Pool     *kvcache.Pool
	Observer *kvcache.Observer // the source of what is cached
	Seed     string            // the observer's hash seed
	// SlotDirMaxBytes, when positive, bounds the bytes of all the files in
	// the directory slot saves write to (--slot-save-max-bytes): a slot
	// save that would take them past it is refused and leaves nothing.
	SlotDirMaxBytes int64

	mu       sync.Mutex    // one save at a time
	gateOnce sync.Once     // makes gate
	gate     chan struct{} // one slot file operation at a time (enterSlotIO)

	// Test hooks, nil outside tests: testWriter wraps the temporary file a
	// save writes, testBeforeRead runs before each block's KV is read.
	testWriter     func(io.Writer) io.Writer
	testBeforeRead func(kvcache.CachedBlock)
}

// DefaultSlotSaveMaxBytes is --slot-save-max-bytes' default, 1 GiB: many
// slot files of a small model at its full context, and far less than a
// disk.
const DefaultSlotSaveMaxBytes = 1 << 30

// CacheIdentity is what KV from a file must match to be reused: the same
// weights, the same block layout, the same numbers (cachefile.Identity).
type CacheIdentity = cachefile.Identity

// CacheFileName is the file Save writes in the cache directory.
const CacheFileName = "kvcache.bin"

// ModelFingerprint identifies the checkpoint in dir, for
// CacheIdentity.Model (cachefile.ModelFingerprint): its config.json, and
// each *.safetensors file's size and its first and last MiB.
func ModelFingerprint(dir string) (string, error) { return cachefile.ModelFingerprint(dir) }

// blockBytes is one record's bytes in the file.
func (c *CacheFile) blockBytes() int { return c.Identity.RecordBytes() }

// Save writes what the cache holds now to Path (through a temporary file
// and a rename, so a crash never leaves half a file under the name) and
// returns how many blocks it wrote. It may run while the engine serves:
// the observer keeps each block from being freed while its KV is copied,
// one block at a time, and a block evicted before its turn is left out
// with its descendants. Blocks cached under a cache salt are left out: the
// file does not record salts, and a restore would commit them to the
// unsalted cache, where every tenant could reuse them.
func (c *CacheFile) Save() (int, error) {
	blocks, _, err := c.saveTo(c.Path, func(b kvcache.CachedBlock) bool { return !b.Salted }, 0)
	return blocks, err
}

// ErrNoCacheFile is Restore's error when there is no file to restore.
var ErrNoCacheFile = errors.New("no saved cache")

// Restore reads Path and commits its blocks into the pool, which must have
// no open sequence (the engine must not be running yet). It returns the
// number of blocks restored. A file that fails a check is refused whole,
// with an error that says which check and why, and nothing is restored. If
// the pool fills up, what fits is kept and the error says how much did not.
func (c *CacheFile) Restore() (int, error) {
	saved, err := c.load(c.Path)
	if err != nil {
		return 0, err
	}
	defer saved.Close()
	n, _, err := c.commit(saved)
	return n, err
}

// commit rebuilds every saved chain, from the root to each block no other
// block continues, and commits it through a short-lived sequence. It
// returns the number of blocks it wrote and the longest chain's tokens. It
// touches the pool: call it before the engine runs, or on the engine's
// goroutine (engine.Server.Do). Each block's KV is read from the file as
// it is written, one layer at a time.
func (c *CacheFile) commit(saved *savedFile) (int, []int32, error) {
	blocks := saved.blocks
	dec := newBlockDecoder(c.Pool)
	byHash := make(map[kvevents.Hash]*cachefile.Record, len(blocks))
	continued := make(map[kvevents.Hash]bool)
	for i := range blocks {
		byHash[blocks[i].Hash] = &blocks[i]
		if blocks[i].HasParent {
			continued[blocks[i].Parent] = true
		}
	}
	bs := c.Identity.BlockSize
	size := int64(c.Pool.BlockBytes())
	restored, skipped := 0, 0
	var longest []int32
	for i := range blocks {
		leaf := &blocks[i]
		if continued[leaf.Hash] {
			continue
		}
		var chain []*cachefile.Record
		for b := leaf; ; {
			chain = append(chain, b)
			if !b.HasParent {
				break
			}
			if b = byHash[b.Parent]; b == nil {
				chain = nil // its parent was evicted before the save: unreachable
				break
			}
		}
		if chain == nil {
			skipped++
			continue
		}
		slices.Reverse(chain)
		tokens := make([]int32, 0, len(chain)*bs)
		for _, b := range chain {
			tokens = append(tokens, b.Tokens...)
		}
		id := -1 - i                               // never an engine request id
		cached, err := c.Pool.Open(id, "", tokens) // the file holds unsalted chains only (Save)
		if err == nil {
			err = c.Pool.Grow(id, len(tokens))
		}
		if err == nil {
			err = c.Pool.PrepareWrite(id, cached, len(tokens)-cached)
		}
		if err != nil {
			c.Pool.Release(id)
			return restored, longest, fmt.Errorf("restored %d blocks, then: %w", restored, err)
		}
		pages := c.Pool.Pages(id)
		for j := cached / bs; j < len(chain); j++ {
			for l := range c.Identity.Layers {
				if err := dec.write(saved.f, chain[j].KVAt+int64(l)*size, l, pages[j]); err != nil {
					c.Pool.Release(id)
					return restored, longest, err
				}
			}
			restored++
		}
		c.Pool.Commit(id, tokens)
		c.Pool.Release(id)
		if len(tokens) > len(longest) {
			longest = tokens
		}
	}
	if skipped > 0 {
		return restored, longest, fmt.Errorf("restored %d blocks; %d chains had lost their first blocks and were left out", restored, skipped)
	}
	return restored, longest, nil
}

// saveCache serves POST /cache/save.
func (h *Handler) saveCache(w http.ResponseWriter, r *http.Request) {
	if h.opts.CacheFile == nil {
		writeError(w, errNotFound("the persistent cache is off on this server; start it with --prefix-caching --cache-dir DIR"))
		return
	}
	n, err := h.opts.CacheFile.Save()
	if err != nil {
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "save_failed", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"saved_blocks": n, "file": filepath.Base(h.opts.CacheFile.Path)})
}

// SetAside renames the file at Path to Path.refused-<time> and returns its
// new path: a file the server could not restore from is kept byte for byte
// for whoever wants to look at it or start the server it was written for,
// and the next save writes a fresh file instead of overwriting it.
func (c *CacheFile) SetAside(now time.Time) (string, error) {
	return cachefile.SetAside(c.Path, now)
}

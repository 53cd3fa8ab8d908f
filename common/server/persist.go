package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/kernels"
)

// CacheFile is the persistent tier, the analogue of llama-server's slot
// save and restore: Save writes every block the prefix cache holds — its
// tokens and its KV in every layer — to one file, and Restore puts them
// back into an empty pool through the Pool API (open a sequence, write the
// saved KV into its blocks, commit, release), so it works with every cache
// design.
//
// The file, little-endian throughout:
//
//	"KVLABKV1"                       8 bytes, the format and its version
//	header length, header            uint32, JSON CacheIdentity + block count
//	one record per block, parents before children:
//	  hash, has parent, parent hash  32 + 1 + 32 bytes (vLLM block hashes)
//	  token ids                      BlockSize × int32
//	  K then V of each layer         Layers × 2 × BlockSize × KVDim values
//	                                 of the pool's dtype (float32, bfloat16
//	                                 or float16: 4 or 2 bytes)
//	SHA-256 of everything above      32 bytes
//
// A file is refused whole — the server then starts with an empty cache —
// when its checksum fails (corrupt or truncated), when it was written for
// another model, block size, layout or dtype (its KV would be garbage
// here), or when a record's hash is not the hash of its tokens.
type CacheFile struct {
	Path     string
	Identity CacheIdentity
	Pool     *kvcache.Pool
	Observer *kvcache.Observer // the source of what is cached
	Seed     string            // the observer's hash seed

	mu sync.Mutex // one save at a time
}

// CacheIdentity is what KV from a file must match to be reused: the same
// weights, the same block layout, the same numbers.
type CacheIdentity struct {
	// Model fingerprints the checkpoint (ModelFingerprint).
	Model     string `json:"model"`
	BlockSize int    `json:"block_size"`
	Layers    int    `json:"layers"`
	KVDim     int    `json:"kv_dim"`
	DType     string `json:"dtype"`
	// HashAlgo and LoRA are how the observer names blocks (its
	// kvevents.Hasher, with Seed): a file's records are checked under them,
	// and restored only into a server that names blocks the same way. A
	// file without them was written under sha256_cbor and no LoRA.
	HashAlgo kvevents.HashAlgo `json:"hash_algo"`
	LoRA     string            `json:"lora_name,omitempty"`
}

type cacheHeader struct {
	CacheIdentity
	Seed   string `json:"hash_seed"`
	Blocks int    `json:"blocks"`
}

const cacheMagic = "KVLABKV1"

// CacheFileName is the file Save writes in the cache directory.
const CacheFileName = "kvcache.bin"

// ModelFingerprint identifies the checkpoint in dir: SHA-256 over its
// config.json and, for each *.safetensors file, its size and its first and
// last MiB. Reading every weight would cost as much as loading the model
// again; the config, the sizes and the tensor bytes at both ends tell apart
// different architectures and different weights of one architecture (the
// synthetic models differ in every tensor).
func ModelFingerprint(dir string) (string, error) {
	h := sha256.New()
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", err
	}
	h.Write(cfg)
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	slices.Sort(files)
	for _, f := range files {
		if err := fingerprintFile(h, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func fingerprintFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "%s %d\n", filepath.Base(path), st.Size())
	const span = 1 << 20
	if _, err := io.CopyN(h, f, min(span, st.Size())); err != nil {
		return err
	}
	if st.Size() > span {
		_, err = io.Copy(h, io.NewSectionReader(f, max(st.Size()-span, span), span))
	}
	return err
}

func (c *CacheFile) blockBytes() int {
	id := c.Identity
	dt, _ := kernels.ParseKVDType(id.DType) // the identity was matched: the pool's own
	return 32 + 1 + 32 + 4*id.BlockSize + id.Layers*2*id.BlockSize*id.KVDim*dt.Bytes()
}

// Save writes what the cache holds now to Path (through a temporary file
// and a rename, so a crash never leaves half a file under the name) and
// returns how many blocks it wrote. It may run while the engine serves:
// the observer keeps every block it lists from being freed until the copy
// is done. Blocks cached under a cache salt are left out: the file does not
// record salts, and a restore would commit them to the unsalted cache,
// where every tenant could reuse them.
func (c *CacheFile) Save() (int, error) {
	blocks, _, err := c.saveTo(c.Path, func(b kvcache.CachedBlock) bool { return !b.Salted })
	return blocks, err
}

// saveTo writes the cached blocks keep accepts to path, in Save's format,
// and returns how many blocks and bytes it wrote. keep must refuse salted
// blocks (the file records no salt). A block keep accepts whose parent it
// refused is written all the same, and a restore leaves it out.
func (c *CacheFile) saveTo(path string, keep func(kvcache.CachedBlock) bool) (blocks, size int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, want := c.Identity.DType, c.Pool.DType().Name(); have != want {
		return 0, 0, fmt.Errorf("the identity names KV of dtype %s, the pool holds %s", have, want)
	}
	var body bytes.Buffer
	var kv []byte
	err = c.Observer.Visit(func(b kvcache.CachedBlock) error {
		if !keep(b) {
			return nil
		}
		body.Write(b.Hash[:])
		if b.Parent != nil {
			body.WriteByte(1)
			body.Write(b.Parent[:])
		} else {
			body.WriteByte(0)
			body.Write(make([]byte, 32))
		}
		for _, t := range b.Tokens {
			body.Write(binary.LittleEndian.AppendUint32(nil, uint32(t)))
		}
		for l := range c.Identity.Layers {
			kv = c.Pool.AppendBlock(kv[:0], l, b.Block)
			body.Write(kv)
		}
		blocks++
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	hdr, err := json.Marshal(cacheHeader{CacheIdentity: c.Identity, Seed: c.Seed, Blocks: blocks})
	if err != nil {
		return 0, 0, err
	}
	var file bytes.Buffer
	file.WriteString(cacheMagic)
	file.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(hdr))))
	file.Write(hdr)
	file.Write(body.Bytes())
	sum := sha256.Sum256(file.Bytes())
	file.Write(sum[:])

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kvcache-*")
	if err != nil {
		return 0, 0, err
	}
	if _, err := tmp.Write(file.Bytes()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return 0, 0, err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return 0, 0, err
	}
	return blocks, file.Len(), os.Rename(tmp.Name(), path)
}

// ErrNoCacheFile is Restore's error when there is no file to restore.
var ErrNoCacheFile = errors.New("no saved cache")

// savedBlock is one record of the file.
type savedBlock struct {
	hash, parent kvevents.Hash
	hasParent    bool
	tokens       []int32
	kv           []byte // Layers × (K, V), little-endian, in the identity's dtype
}

// Restore reads Path and commits its blocks into the pool, which must have
// no open sequence (the engine must not be running yet). It returns the
// number of blocks restored. A file that fails a check is refused whole,
// with an error that says which check and why, and nothing is restored. If
// the pool fills up, what fits is kept and the error says how much did not.
func (c *CacheFile) Restore() (int, error) {
	blocks, _, err := c.load(c.Path)
	if err != nil {
		return 0, err
	}
	n, _, err := c.commit(blocks)
	return n, err
}

// load reads and checks the file at path; it returns its blocks and its
// size in bytes, or ErrNoCacheFile when there is no file.
func (c *CacheFile) load(path string) ([]savedBlock, int, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, ErrNoCacheFile
	}
	if err != nil {
		return nil, 0, err
	}
	blocks, err := c.parse(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("refusing %s: %w", path, err)
	}
	return blocks, len(raw), nil
}

func (c *CacheFile) parse(raw []byte) ([]savedBlock, error) {
	if len(raw) < len(cacheMagic)+4+sha256.Size {
		return nil, fmt.Errorf("truncated: %d bytes is shorter than any cache file", len(raw))
	}
	body, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("checksum mismatch: the file is corrupt or truncated")
	}
	if string(body[:len(cacheMagic)]) != cacheMagic {
		return nil, fmt.Errorf("not a kvlab cache file (magic %q, want %q)", body[:len(cacheMagic)], cacheMagic)
	}
	body = body[len(cacheMagic):]
	n := int(binary.LittleEndian.Uint32(body))
	body = body[4:]
	if n > len(body) {
		return nil, fmt.Errorf("truncated header: %d bytes announced, %d left", n, len(body))
	}
	var hdr cacheHeader
	if err := json.Unmarshal(body[:n], &hdr); err != nil {
		return nil, fmt.Errorf("bad header: %w", err)
	}
	body = body[n:]
	if have, want := hdr.CacheIdentity, c.Identity; have.HashAlgo != want.HashAlgo || have.LoRA != want.LoRA {
		return nil, fmt.Errorf("written under another block hash: the file names its blocks by %s with LoRA %q, this server by %s with LoRA %q (-prefix-caching-hash-algo, -lora-name)",
			have.HashAlgo, have.LoRA, want.HashAlgo, want.LoRA)
	}
	if have, want := hdr.CacheIdentity, c.Identity; have != want {
		return nil, fmt.Errorf("written for another configuration: the file has model %.12s…, block size %d, %d layers × %d KV width, %s; this server has model %.12s…, block size %d, %d layers × %d KV width, %s",
			have.Model, have.BlockSize, have.Layers, have.KVDim, have.DType, want.Model, want.BlockSize, want.Layers, want.KVDim, want.DType)
	}
	size := c.blockBytes()
	if hdr.Blocks < 0 || len(body) != hdr.Blocks*size {
		return nil, fmt.Errorf("the header announces %d blocks of %d bytes, the file holds %d bytes", hdr.Blocks, size, len(body))
	}
	hasher := kvevents.NewHasher(hdr.HashAlgo, hdr.Seed, hdr.LoRA)
	bs := c.Identity.BlockSize
	out := make([]savedBlock, hdr.Blocks)
	for i := range out {
		rec := body[i*size : (i+1)*size]
		b := &out[i]
		copy(b.hash[:], rec[:32])
		b.hasParent = rec[32] == 1
		copy(b.parent[:], rec[33:65])
		b.tokens = make([]int32, bs)
		for j := range b.tokens {
			b.tokens[j] = int32(binary.LittleEndian.Uint32(rec[65+4*j:]))
		}
		b.kv = rec[65+4*bs:]
		var want kvevents.Hash
		if b.hasParent {
			want = hasher.Next(b.parent, b.tokens)
		} else {
			want = hasher.First(b.tokens, "")
		}
		if want != b.hash {
			return nil, fmt.Errorf("block %d: its hash is not the hash of its tokens under its parent", i)
		}
	}
	return out, nil
}

// commit rebuilds every saved chain, from the root to each block no other
// block continues, and commits it through a short-lived sequence. It
// returns the number of blocks it wrote and the longest chain's tokens. It
// touches the pool: call it before the engine runs, or on the engine's
// goroutine (engine.Server.Do).
func (c *CacheFile) commit(blocks []savedBlock) (int, []int32, error) {
	byHash := make(map[kvevents.Hash]*savedBlock, len(blocks))
	continued := make(map[kvevents.Hash]bool)
	for i := range blocks {
		byHash[blocks[i].hash] = &blocks[i]
		if blocks[i].hasParent {
			continued[blocks[i].parent] = true
		}
	}
	bs := c.Identity.BlockSize
	size := c.Pool.BlockBytes()
	restored, skipped := 0, 0
	var longest []int32
	for i := range blocks {
		leaf := &blocks[i]
		if continued[leaf.hash] {
			continue
		}
		var chain []*savedBlock
		for b := leaf; ; {
			chain = append(chain, b)
			if !b.hasParent {
				break
			}
			if b = byHash[b.parent]; b == nil {
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
			tokens = append(tokens, b.tokens...)
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
			kv := chain[j].kv
			for l := range c.Identity.Layers {
				if err := c.Pool.WriteBlockBytes(l, pages[j], kv[l*size:(l+1)*size]); err != nil {
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

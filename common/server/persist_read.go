package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/kernels"
)

// maxHeaderBytes bounds a file's JSON header. Save writes a few hundred
// bytes; a longer one is not a cache file, whatever its checksum says.
const maxHeaderBytes = 1 << 20

// savedBlock is one record of a checked file: what a restore needs to
// place the block, and where its KV lies in the file. The KV itself stays
// on disk until the block is written into the pool.
type savedBlock struct {
	hash, parent kvevents.Hash
	hasParent    bool
	tokens       []int32
	kvAt         int64 // offset of the record's KV: Layers × (K, V) in the identity's dtype
}

// savedFile is a file that passed every check, open for the KV reads of
// commit. Close it when done.
type savedFile struct {
	f      *os.File
	size   int64
	blocks []savedBlock
}

func (s *savedFile) Close() error { return s.f.Close() }

// load opens the file at path and checks it (scan); it returns
// ErrNoCacheFile when there is no file, and an error naming the path and
// the check for a file it refuses.
func (c *CacheFile) load(path string) (*savedFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoCacheFile
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	var blocks []savedBlock
	if err == nil {
		blocks, err = c.scan(f, st.Size())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("refusing %s: %w", path, err)
	}
	return &savedFile{f: f, size: st.Size(), blocks: blocks}, nil
}

// scan checks a file of size bytes read through r and returns its records,
// without their KV. It reads the file twice, through a fixed buffer: once
// for the checksum, which must hold before anything else is believed, then
// the header and each record's hash, parent and tokens. Every count the
// file states is checked against the bytes there are before anything is
// allocated for it, so what scan allocates is bounded by the file's size
// however the file lies: the header length by the file and maxHeaderBytes,
// the block count by the bytes after the header (it must account for them
// exactly).
func (c *CacheFile) scan(r io.ReaderAt, size int64) ([]savedBlock, error) {
	const lead = int64(len(cacheMagic) + 4)
	if size < lead+sha256.Size {
		return nil, fmt.Errorf("truncated: %d bytes is shorter than any cache file", size)
	}
	end := size - sha256.Size
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(r, 0, end), make([]byte, ioBufferBytes)); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	var sum [sha256.Size]byte
	var head [lead]byte
	if _, err := r.ReadAt(sum[:], end); err != nil {
		return nil, fmt.Errorf("reading the checksum: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), sum[:]) {
		return nil, errors.New("checksum mismatch: the file is corrupt or truncated")
	}
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if magic := head[:len(cacheMagic)]; string(magic) != cacheMagic {
		return nil, fmt.Errorf("not a kvlab cache file (magic %q, want %q)", magic, cacheMagic)
	}
	n := int64(binary.LittleEndian.Uint32(head[len(cacheMagic):]))
	if n > end-lead {
		return nil, fmt.Errorf("truncated header: %d bytes announced, %d left", n, end-lead)
	}
	if n > maxHeaderBytes {
		return nil, fmt.Errorf("a header of %d bytes: a cache file's is under %d", n, maxHeaderBytes)
	}
	raw := make([]byte, n)
	if _, err := r.ReadAt(raw, lead); err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	var hdr cacheHeader
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return nil, fmt.Errorf("bad header: %w", err)
	}
	if have, want := hdr.CacheIdentity, c.Identity; have.HashAlgo != want.HashAlgo || have.LoRA != want.LoRA {
		return nil, fmt.Errorf("written under another block hash: the file names its blocks by %s with LoRA %q, this server by %s with LoRA %q (-prefix-caching-hash-algo, -lora-name)",
			have.HashAlgo, have.LoRA, want.HashAlgo, want.LoRA)
	}
	if have, want := hdr.CacheIdentity, c.Identity; have != want {
		return nil, fmt.Errorf("written for another configuration: the file has model %.12s…, block size %d, %d layers × %d KV width, %s; this server has model %.12s…, block size %d, %d layers × %d KV width, %s",
			have.Model, have.BlockSize, have.Layers, have.KVDim, have.DType, want.Model, want.BlockSize, want.Layers, want.KVDim, want.DType)
	}
	start := lead + n
	rec, body := int64(c.blockBytes()), end-start
	// The count is checked by division first: a product of a huge count and
	// the record size can wrap around to the body's length.
	if hdr.Blocks < 0 || int64(hdr.Blocks) > body/rec || int64(hdr.Blocks)*rec != body {
		return nil, fmt.Errorf("the header announces %d blocks of %d bytes, the file holds %d bytes", hdr.Blocks, rec, body)
	}
	hasher := kvevents.NewHasher(hdr.HashAlgo, hdr.Seed, hdr.LoRA)
	bs := c.Identity.BlockSize
	out := make([]savedBlock, hdr.Blocks)
	tokens := make([]int32, hdr.Blocks*bs)
	meta := make([]byte, 65+4*bs)
	for i := range out {
		at := start + int64(i)*rec
		if _, err := r.ReadAt(meta, at); err != nil {
			return nil, fmt.Errorf("block %d: reading: %w", i, err)
		}
		b := &out[i]
		copy(b.hash[:], meta[:32])
		b.hasParent = meta[32] == 1
		copy(b.parent[:], meta[33:65])
		b.tokens = tokens[i*bs : (i+1)*bs : (i+1)*bs]
		for j := range b.tokens {
			b.tokens[j] = int32(binary.LittleEndian.Uint32(meta[65+4*j:]))
		}
		b.kvAt = at + int64(len(meta))
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

// blockDecoder writes one layer of one saved block into the pool, reading
// its bytes from the file into buffers it reuses from block to block: a
// restore holds one layer of one block at a time. It does what
// kvcache.Pool.WriteBlockBytes does.
type blockDecoder struct {
	pool *kvcache.Pool
	raw  []byte
	kv   []float32
}

func newBlockDecoder(p *kvcache.Pool) *blockDecoder {
	return &blockDecoder{pool: p, raw: make([]byte, p.BlockBytes()), kv: make([]float32, 2*p.BlockSize()*p.KVDim())}
}

// write reads layer l's K and V at offset at of r and stores them as
// layer l's KV of block b, which PrepareWrite made private.
func (d *blockDecoder) write(r io.ReaderAt, at int64, l int, b int32) error {
	if _, err := r.ReadAt(d.raw, at); err != nil {
		return fmt.Errorf("reading a block's KV: %w", err)
	}
	switch d.pool.DType() {
	case kernels.KVF32:
		for i := range d.kv {
			d.kv[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.raw[4*i:]))
		}
	case kernels.KVBF16:
		for i := range d.kv {
			d.kv[i] = kernels.BF16ToF32(binary.LittleEndian.Uint16(d.raw[2*i:]))
		}
	case kernels.KVF16:
		for i := range d.kv {
			d.kv[i] = kernels.F16ToF32(binary.LittleEndian.Uint16(d.raw[2*i:]))
		}
	}
	n := len(d.kv) / 2
	return d.pool.WriteBlock(l, b, d.kv[:n], d.kv[n:])
}

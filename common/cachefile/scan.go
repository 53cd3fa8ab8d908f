package cachefile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"kvlab/common/kvevents"
)

// Record is one record of a checked file: what a reader needs to place the
// block, and where its KV lies in the file. The KV itself stays in the
// file until the reader wants it.
type Record struct {
	Hash, Parent kvevents.Hash
	HasParent    bool
	Tokens       []int32
	KVAt         int64 // offset of the record's KV: Layers × (K, V) in the identity's dtype
}

// Scan checks a file of size bytes read through r, written for want, and
// returns its header and its records, without their KV. It reads the file
// twice, through a fixed buffer: once for the checksum, which must hold
// before anything else is believed, then the header and each record's
// hash, parent and tokens. Every count the file states is checked against
// the bytes there are before anything is allocated for it, so what Scan
// allocates is bounded by the file's size however the file lies: the
// header length by the file and MaxHeaderBytes, the block count by the
// bytes after the header (it must account for them exactly). A record
// whose hash is not the hash of its tokens under its parent (and the
// header's seed) fails the file.
//
// The seed is not checked against anything: a restore commits the tokens
// and lets the cache name them again; a reader that looks blocks up by
// their hash (DiskTier) compares it itself.
func Scan(r io.ReaderAt, size int64, want Identity) (Header, []Record, error) {
	const lead = int64(LeadBytes)
	var hdr Header
	if size < lead+sha256.Size {
		return hdr, nil, fmt.Errorf("truncated: %d bytes is shorter than any cache file", size)
	}
	end := size - sha256.Size
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.NewSectionReader(r, 0, end), make([]byte, BufferBytes)); err != nil {
		return hdr, nil, fmt.Errorf("reading: %w", err)
	}
	var sum [sha256.Size]byte
	var head [lead]byte
	if _, err := r.ReadAt(sum[:], end); err != nil {
		return hdr, nil, fmt.Errorf("reading the checksum: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), sum[:]) {
		return hdr, nil, errors.New("checksum mismatch: the file is corrupt or truncated")
	}
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return hdr, nil, fmt.Errorf("reading: %w", err)
	}
	if magic := head[:len(Magic)]; string(magic) != Magic {
		return hdr, nil, fmt.Errorf("not a kvlab cache file (magic %q, want %q)", magic, Magic)
	}
	n := int64(binary.LittleEndian.Uint32(head[len(Magic):]))
	if n > end-lead {
		return hdr, nil, fmt.Errorf("truncated header: %d bytes announced, %d left", n, end-lead)
	}
	if n > MaxHeaderBytes {
		return hdr, nil, fmt.Errorf("a header of %d bytes: a cache file's is under %d", n, MaxHeaderBytes)
	}
	raw := make([]byte, n)
	if _, err := r.ReadAt(raw, lead); err != nil {
		return hdr, nil, fmt.Errorf("reading the header: %w", err)
	}
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return Header{}, nil, fmt.Errorf("bad header: %w", err)
	}
	if have := hdr.Identity; have.HashAlgo != want.HashAlgo || have.LoRA != want.LoRA {
		return hdr, nil, fmt.Errorf("written under another block hash: the file names its blocks by %s with LoRA %q, this server by %s with LoRA %q (-prefix-caching-hash-algo, -lora-name)",
			have.HashAlgo, have.LoRA, want.HashAlgo, want.LoRA)
	}
	if have := hdr.Identity; have != want {
		return hdr, nil, fmt.Errorf("written for another configuration: the file has model %.12s…, block size %d, %d layers × %d KV width, %s; this server has model %.12s…, block size %d, %d layers × %d KV width, %s",
			have.Model, have.BlockSize, have.Layers, have.KVDim, have.DType, want.Model, want.BlockSize, want.Layers, want.KVDim, want.DType)
	}
	start := lead + n
	rec, body := int64(want.RecordBytes()), end-start
	// The count is checked by division first: a product of a huge count and
	// the record size can wrap around to the body's length.
	if hdr.Blocks < 0 || int64(hdr.Blocks) > body/rec || int64(hdr.Blocks)*rec != body {
		return hdr, nil, fmt.Errorf("the header announces %d blocks of %d bytes, the file holds %d bytes", hdr.Blocks, rec, body)
	}
	hasher := kvevents.NewHasher(hdr.HashAlgo, hdr.Seed, hdr.LoRA)
	bs := want.BlockSize
	out := make([]Record, hdr.Blocks)
	tokens := make([]int32, hdr.Blocks*bs)
	meta := make([]byte, want.HeadBytes())
	for i := range out {
		at := start + int64(i)*rec
		if _, err := r.ReadAt(meta, at); err != nil {
			return hdr, nil, fmt.Errorf("block %d: reading: %w", i, err)
		}
		b := &out[i]
		copy(b.Hash[:], meta[:32])
		b.HasParent = meta[32] == 1
		copy(b.Parent[:], meta[33:65])
		b.Tokens = tokens[i*bs : (i+1)*bs : (i+1)*bs]
		for j := range b.Tokens {
			b.Tokens[j] = int32(binary.LittleEndian.Uint32(meta[65+4*j:]))
		}
		b.KVAt = at + int64(len(meta))
		var want kvevents.Hash
		if b.HasParent {
			want = hasher.Next(b.Parent, b.Tokens)
		} else {
			want = hasher.First(b.Tokens, "")
		}
		if want != b.Hash {
			return hdr, nil, fmt.Errorf("block %d: its hash is not the hash of its tokens under its parent", i)
		}
	}
	return hdr, out, nil
}

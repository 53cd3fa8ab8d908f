// Package cachefile is the format of kvlab's KV cache files ("KVLABKV1"):
// what the server's --cache-dir and slot files hold, and what DiskTier
// keeps each block in. A file is, little-endian throughout:
//
//	"KVLABKV1"                       8 bytes, the format and its version
//	header length, header            uint32, JSON Header: Identity, hash
//	                                 seed, block count (a writer may pad it
//	                                 with trailing spaces)
//	one record per block, parents before children:
//	  hash, has parent, parent hash  32 + 1 + 32 bytes (vLLM block hashes)
//	  token ids                      BlockSize × int32
//	  K then V of each layer         Layers × 2 × BlockSize × KVDim values
//	                                 of the pool's dtype (float32, bfloat16
//	                                 or float16: 4 or 2 bytes)
//	SHA-256 of everything above      32 bytes
//
// Scan is the one reader of that format: every file is checked by it
// before anything in it is believed.
package cachefile

import (
	"encoding/binary"
	"encoding/json"

	"kvlab/common/kvevents"
	"kvlab/kernels"
)

// Magic opens every cache file: the format and its version.
const Magic = "KVLABKV1"

// LeadBytes is the magic and the header's length, before the header.
const LeadBytes = len(Magic) + 4

// MaxHeaderBytes bounds a file's JSON header. A writer writes a few hundred
// bytes; a longer one is not a cache file, whatever its checksum says.
const MaxHeaderBytes = 1 << 20

// BufferBytes is the buffer a save or a scan streams a file through: what
// either holds of the file at once, besides one block.
const BufferBytes = 64 << 10

// Identity is what KV from a file must match to be reused: the same
// weights, the same block layout, the same numbers.
type Identity struct {
	// Model fingerprints the checkpoint (ModelFingerprint).
	Model     string `json:"model"`
	BlockSize int    `json:"block_size"`
	Layers    int    `json:"layers"`
	KVDim     int    `json:"kv_dim"`
	DType     string `json:"dtype"`
	// HashAlgo and LoRA are how the observer names blocks (its
	// kvevents.Hasher, with the header's seed): a file's records are
	// checked under them, and used only by a server that names blocks the
	// same way. A file without them was written under sha256_cbor and no
	// LoRA.
	HashAlgo kvevents.HashAlgo `json:"hash_algo"`
	LoRA     string            `json:"lora_name,omitempty"`
}

// Header is a file's JSON header.
type Header struct {
	Identity
	Seed   string `json:"hash_seed"`
	Blocks int    `json:"blocks"`
}

// MarshalHeader is the header of a file of blocks records for id under
// seed, unpadded.
func MarshalHeader(id Identity, seed string, blocks int) ([]byte, error) {
	return json.Marshal(Header{Identity: id, Seed: seed, Blocks: blocks})
}

// HeadBytes is the bytes of a record before its KV: hash, parent flag,
// parent hash, tokens.
func (id Identity) HeadBytes() int { return 32 + 1 + 32 + 4*id.BlockSize }

// KVBytes is the bytes of a record's KV: every layer's K then V in the
// identity's dtype, what kvcache.Pool.AppendBlock writes for each layer.
func (id Identity) KVBytes() int {
	dt, _ := kernels.ParseKVDType(id.DType) // a file's identity is matched against the pool's own first
	return id.Layers * 2 * id.BlockSize * id.KVDim * dt.Bytes()
}

// RecordBytes is the bytes of one record.
func (id Identity) RecordBytes() int { return id.HeadBytes() + id.KVBytes() }

// NoParent is a root block's has-parent flag and parent hash.
var NoParent [33]byte

// AppendRecordHead appends the part of a record before its KV: hash, the
// parent flag and hash (zeros for a root), the tokens.
func AppendRecordHead(dst []byte, hash kvevents.Hash, parent *kvevents.Hash, tokens []int32) []byte {
	dst = append(dst, hash[:]...)
	if parent != nil {
		dst = append(dst, 1)
		dst = append(dst, parent[:]...)
	} else {
		dst = append(dst, NoParent[:]...)
	}
	for _, t := range tokens {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(t))
	}
	return dst
}

// AppendLead appends the magic and a header's length.
func AppendLead(dst []byte, headerLen int) []byte {
	dst = append(dst, Magic...)
	return binary.LittleEndian.AppendUint32(dst, uint32(headerLen))
}

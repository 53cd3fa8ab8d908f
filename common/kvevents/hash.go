// Package kvevents is the vocabulary a serving engine uses to tell a cluster
// router what its prefix cache holds: block hashes computed exactly as vLLM
// computes them, the events vLLM publishes when blocks enter and leave its
// cache (BlockStored, BlockRemoved, AllBlocksCleared), batches of them, and
// the two transports they travel on — a server-sent-event stream of JSON
// batches (ReadStream reads it) and vLLM's own ZeroMQ PUB socket carrying
// msgpack (Publisher, EncodeVLLM).
//
// The hashes are the contract. A router that computes BlockHashes of a new
// prompt gets the same 32 bytes this engine announced for the blocks it
// holds, and the same bytes a vLLM replica started with PYTHONHASHSEED equal
// to the seed would announce, so one index can score both. docs/kv_events.md
// walks through the encoding; testdata/block_hashes.json holds vectors
// derived by scripts/vllm_block_hashes.py from vLLM's definition.
package kvevents

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Hash is one block's hash: SHA-256 over the CBOR encoding of (parent hash,
// the block's token ids, extra keys), as vLLM's sha256_cbor block hash.
type Hash [32]byte

// String returns the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Uint64 returns the 64-bit form vLLM publishes when asked for integer block
// hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES): the last eight bytes, read
// big-endian. llm-d's indexer reduces a byte hash to the same number.
func (h Hash) Uint64() uint64 { return binary.BigEndian.Uint64(h[24:]) }

// MarshalJSON writes the hash as a hex string, the form every JSON consumer
// of this package reads.
func (h Hash) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+2*len(h))
	b = append(b, '"')
	b = hex.AppendEncode(b, h[:])
	return append(b, '"'), nil
}

// UnmarshalJSON reads a 64-digit hex string.
func (h *Hash) UnmarshalJSON(b []byte) error {
	if len(b) != 2+2*len(h) || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("kvevents: a block hash is a string of %d hex digits, have %s", 2*len(h), b)
	}
	_, err := hex.Decode(h[:], b[1:len(b)-1])
	if err != nil {
		return fmt.Errorf("kvevents: block hash %s: %w", b, err)
	}
	return nil
}

// ParseHash reads a hash from its String form.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("kvevents: a block hash has %d hex digits, %q has %d", 2*len(h), s, len(s))
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err
}

// DefaultHashSeed is the seed BlockHashes uses. vLLM derives the parent of
// every chain's first block from the PYTHONHASHSEED environment variable
// (and from random bytes when it is unset, which makes its hashes useless
// to anyone else); a vLLM replica started with PYTHONHASHSEED=0 computes the
// same hashes as this package's defaults.
const DefaultHashSeed = "0"

// RootHash returns vLLM's NONE_HASH for PYTHONHASHSEED=seed: the hash of the
// seed string itself. It is the parent of every chain's first block; the
// events still carry no parent for that block, as vLLM's do.
func RootHash(seed string) Hash {
	var b []byte
	b = cborHead(b, majorText, uint64(len(seed)))
	b = append(b, seed...)
	return sha256.Sum256(b)
}

var defaultRoot = RootHash(DefaultHashSeed)

// HashBlock returns the hash of one full block of tokens whose parent block
// hashes to parent (RootHash for the first block). salt, when not empty, is
// the request's cache_salt: vLLM adds it to the extra keys of the first
// block only, and later blocks inherit it through the chain, so pass it for
// the first block and "" for the rest.
func HashBlock(parent Hash, tokens []int32, salt string) Hash {
	// Canonical CBOR of the 3-tuple (parent, tuple(tokens), extra_keys);
	// cbor2.dumps(canonical=True) writes every head in its shortest form,
	// which is all canonical means for these types (no maps, no floats).
	b := make([]byte, 0, 3+34+9+9*len(tokens)+9+len(salt))
	b = cborHead(b, majorArray, 3)
	b = cborHead(b, majorBytes, uint64(len(parent)))
	b = append(b, parent[:]...)
	b = cborHead(b, majorArray, uint64(len(tokens)))
	for _, t := range tokens {
		if t >= 0 {
			b = cborHead(b, majorUint, uint64(t))
		} else {
			b = cborHead(b, majorNegInt, uint64(-1-int64(t)))
		}
	}
	if salt == "" {
		b = append(b, cborNull) // vLLM's extra keys are None, not an empty tuple
	} else {
		b = cborHead(b, majorArray, 1)
		b = cborHead(b, majorText, uint64(len(salt)))
		b = append(b, salt...)
	}
	return sha256.Sum256(b)
}

// BlockHashes returns the chained hash of every full block of tokens,
// blockSize tokens each, with DefaultHashSeed's root; a partial last block
// has no hash (vLLM caches full blocks only). salt is the request's
// cache_salt, "" for none.
func BlockHashes(tokens []int32, blockSize int, salt string) []Hash {
	return ChainHashes(defaultRoot, tokens, blockSize, salt)
}

// ChainHashes is BlockHashes from another root (RootHash of another seed).
func ChainHashes(root Hash, tokens []int32, blockSize int, salt string) []Hash {
	if blockSize <= 0 {
		return nil
	}
	out := make([]Hash, 0, len(tokens)/blockSize)
	parent := root
	for i := 0; (i+1)*blockSize <= len(tokens); i++ {
		s := ""
		if i == 0 {
			s = salt
		}
		parent = HashBlock(parent, tokens[i*blockSize:(i+1)*blockSize], s)
		out = append(out, parent)
	}
	return out
}

// CBOR major types (RFC 8949 §3.1) and the one simple value used here.
const (
	majorUint   = 0
	majorNegInt = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	cborNull    = 0xf6
)

// cborHead appends the shortest head for major type m with argument n
// (RFC 8949 §3 and §4.2.1, "preferred serialization").
func cborHead(b []byte, m byte, n uint64) []byte {
	m <<= 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, m|27), n)
	}
}

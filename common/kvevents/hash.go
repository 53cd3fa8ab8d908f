// Package kvevents is the vocabulary a serving engine uses to tell a cluster
// router what its prefix cache holds: block hashes computed exactly as vLLM
// computes them, the events vLLM publishes when blocks enter and leave its
// cache (BlockStored, BlockRemoved, AllBlocksCleared), batches of them, and
// the two transports they travel on — a server-sent-event stream of JSON
// batches (ReadStream reads it) and vLLM's own ZeroMQ PUB socket carrying
// msgpack (Publisher, EncodeVLLM).
//
// The hashes are the contract. vLLM names a block by one of four hash
// algorithms, chosen by its --prefix-caching-hash-algo flag (HashAlgo:
// sha256, its default, and sha256_cbor, xxhash, xxhash_cbor), chained from
// a root derived from PYTHONHASHSEED, with a request's LoRA name and
// cache_salt mixed in as vLLM mixes them (Hasher). This package's default,
// BlockHashes, is sha256_cbor rooted at seed "0": a router that computes
// BlockHashes of a new prompt gets the same bytes this engine announced for
// the blocks it holds, and the same bytes a vLLM replica started with
// --prefix-caching-hash-algo sha256_cbor and PYTHONHASHSEED=0 would
// announce, so one index can score both. A replica on another algorithm or
// seed matches a Hasher built for them. docs/kv_events.md walks through the
// encodings; testdata/block_hashes.json and testdata/block_hashes_algos.json
// hold vectors derived by scripts/vllm_block_hashes.py from vLLM's
// definitions.
package kvevents

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	// XXH3-128 is a long, carefully tuned algorithm with many length
	// special cases; zeebo/xxh3 is a maintained port tested against the
	// reference C implementation, so it is used rather than a hand-written
	// copy (testdata/block_hashes_algos.json checks it against Python's
	// xxhash, the library vLLM calls).
	"github.com/zeebo/xxh3"
)

// Hash is one block's hash. A 32-byte digest (sha256, sha256_cbor) fills
// it. A 16-byte digest (xxhash, xxhash_cbor) sits in its last 16 bytes
// behind 16 zero bytes, so that its big-endian value, and Uint64, are the
// numbers vLLM derives from the 16 bytes; Bytes returns the digest as vLLM
// holds it.
type Hash [32]byte

// String returns the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Bytes returns the digest as vLLM holds it under algorithm a: all 32
// bytes, or the last 16 for the xxhash algorithms.
func (h Hash) Bytes(a HashAlgo) []byte { return h[len(h)-a.Size():] }

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

// HashAlgo is one of vLLM's block-hash algorithms, named as its
// --prefix-caching-hash-algo flag names them. Each serializes the same
// Python object and digests the bytes:
//
//	sha256       SHA-256 of pickle.dumps(obj, protocol=5) (vLLM's default)
//	sha256_cbor  SHA-256 of the canonical CBOR of obj
//	xxhash       XXH3-128 of the pickle (16 bytes, big-endian)
//	xxhash_cbor  XXH3-128 of the canonical CBOR
//
// The zero value is sha256_cbor, this package's default.
type HashAlgo uint8

const (
	SHA256CBOR HashAlgo = iota
	SHA256
	XXHash
	XXHashCBOR
	numHashAlgos
)

var hashAlgoNames = [numHashAlgos]string{"sha256_cbor", "sha256", "xxhash", "xxhash_cbor"}

// HashAlgos returns every algorithm, in the order vLLM lists them.
func HashAlgos() []HashAlgo { return []HashAlgo{SHA256, SHA256CBOR, XXHash, XXHashCBOR} }

// ParseHashAlgo returns the algorithm vLLM calls name.
func ParseHashAlgo(name string) (HashAlgo, error) {
	for a, n := range hashAlgoNames {
		if n == name {
			return HashAlgo(a), nil
		}
	}
	var names []string
	for _, a := range HashAlgos() {
		names = append(names, a.String())
	}
	return 0, fmt.Errorf("kvevents: unknown block-hash algorithm %q (vLLM's are %s)", name, strings.Join(names, ", "))
}

// String returns vLLM's name of the algorithm.
func (a HashAlgo) String() string {
	if a < numHashAlgos {
		return hashAlgoNames[a]
	}
	return fmt.Sprintf("HashAlgo(%d)", uint8(a))
}

// MarshalText writes vLLM's name (for JSON and flag.TextVar).
func (a HashAlgo) MarshalText() ([]byte, error) {
	if a >= numHashAlgos {
		return nil, fmt.Errorf("kvevents: no block-hash algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText reads vLLM's name.
func (a *HashAlgo) UnmarshalText(b []byte) error {
	v, err := ParseHashAlgo(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Size returns the digest's length in bytes: 32 for SHA-256, 16 for XXH3-128.
func (a HashAlgo) Size() int {
	if a == XXHash || a == XXHashCBOR {
		return 16
	}
	return 32
}

func (a HashAlgo) pickled() bool { return a == SHA256 || a == XXHash }

func (a HashAlgo) digest(b []byte) Hash {
	var h Hash
	if a == XXHash || a == XXHashCBOR {
		d := xxh3.Hash128(b).Bytes()
		copy(h[len(h)-len(d):], d[:])
		return h
	}
	return sha256.Sum256(b)
}

// Root returns vLLM's NONE_HASH under PYTHONHASHSEED=seed: the algorithm
// applied to the seed string. It is the parent of every chain's first
// block; the events still carry no parent for that block, as vLLM's do.
func (a HashAlgo) Root(seed string) Hash {
	if a.pickled() {
		return a.digest(pickleString(seed))
	}
	return a.digest(cborText(nil, seed))
}

// Block returns the algorithm applied to one block's object, the tuple
// (parent, tuple(tokens), extra): parent is the previous block's digest as
// vLLM holds it (Hash.Bytes) or the root's for the first block, and extra
// the block's extra keys in vLLM's order, an empty list being Python's None
// as vLLM passes it (Hasher.ExtraKeys builds them).
func (a HashAlgo) Block(parent []byte, tokens []int32, extra []string) Hash {
	return blockHash(a, parent, tokens, extra)
}

// blockHash is Block for token ids of either width: vLLM's are Python ints,
// so the encoders are tested beyond int32 too.
func blockHash[T int32 | int64](a HashAlgo, parent []byte, tokens []T, extra []string) Hash {
	if a.pickled() {
		return a.digest(pickleBlock(parent, tokens, extra))
	}
	return a.digest(cborBlock(parent, tokens, extra))
}

// DefaultHashSeed is the seed BlockHashes uses, for a vLLM replica started
// with PYTHONHASHSEED=0.
const DefaultHashSeed = "0"

// UnsetHashSeed is the seed vLLM derives its root from when PYTHONHASHSEED
// is not set and the algorithm is sha256 or sha256_cbor: every such replica
// shares it. Under xxhash and xxhash_cbor an unset PYTHONHASHSEED draws a
// random seed per process instead (NewUnseededHasher). vLLM releases before
// this rule took 32 random bytes as the root for every algorithm.
const UnsetHashSeed = "vllm-none-hash"

// Hasher names blocks as one vLLM replica does: its algorithm, its root
// (NONE_HASH, from PYTHONHASHSEED) and the LoRA adapter its requests run
// under. vLLM gives every block of a request extra keys: the LoRA name, on
// every block, then the cache_salt, on the first block only; later blocks
// inherit both through their parents. The zero Hasher is the default:
// sha256_cbor, seed "0", no LoRA.
type Hasher struct {
	algo HashAlgo
	seed string
	root Hash
	lora string
	set  bool // built by a constructor; the zero Hasher is the default
}

// NewHasher returns the hasher of a replica running algo with
// PYTHONHASHSEED=seed, every request under the LoRA adapter named lora
// ("" for none).
func NewHasher(algo HashAlgo, seed, lora string) Hasher {
	return Hasher{algo: algo, seed: seed, root: algo.Root(seed), lora: lora, set: true}
}

// NewUnseededHasher returns the hasher of a replica running algo without
// PYTHONHASHSEED: seeded with UnsetHashSeed under sha256 and sha256_cbor,
// and under xxhash and xxhash_cbor with a seed of 32 random bytes in hex,
// as vLLM draws one, so that its hashes mean nothing outside this process.
func NewUnseededHasher(algo HashAlgo, lora string) Hasher {
	if algo == SHA256 || algo == SHA256CBOR {
		return NewHasher(algo, UnsetHashSeed, lora)
	}
	var seed [32]byte
	rand.Read(seed[:]) // never fails (crypto/rand)
	return NewHasher(algo, hex.EncodeToString(seed[:]), lora)
}

var defaultHasher = NewHasher(SHA256CBOR, DefaultHashSeed, "")

func (h Hasher) orDefault() Hasher {
	if !h.set {
		return defaultHasher
	}
	return h
}

// Algo returns the hasher's algorithm.
func (h Hasher) Algo() HashAlgo { return h.orDefault().algo }

// Seed returns the PYTHONHASHSEED the root is derived from.
func (h Hasher) Seed() string { return h.orDefault().seed }

// Root returns the root: NONE_HASH, the parent of every first block.
func (h Hasher) Root() Hash { return h.orDefault().root }

// LoRA returns the LoRA name every block carries, "" for none.
func (h Hasher) LoRA() string { return h.lora }

// ExtraKeys returns the extra keys of a block, as vLLM orders them: the
// LoRA name, then, on the first block of a request, its cache_salt (""
// for none). It returns nil, vLLM's None, when there are none.
func (h Hasher) ExtraKeys(first bool, salt string) []string {
	var keys []string
	if h.lora != "" {
		keys = append(keys, h.lora)
	}
	if first && salt != "" {
		keys = append(keys, salt)
	}
	return keys
}

// First returns the hash of a request's first full block; salt is its
// cache_salt, "" for none.
func (h Hasher) First(tokens []int32, salt string) Hash {
	h = h.orDefault()
	return h.algo.Block(h.root.Bytes(h.algo), tokens, h.ExtraKeys(true, salt))
}

// Next returns the hash of a full block whose previous block hashes to
// parent.
func (h Hasher) Next(parent Hash, tokens []int32) Hash {
	h = h.orDefault()
	return h.algo.Block(parent.Bytes(h.algo), tokens, h.ExtraKeys(false, ""))
}

// BlockHashes returns the chained hash of every full block of tokens,
// blockSize tokens each; a partial last block has no hash (vLLM caches
// full blocks only). salt is the request's cache_salt, "" for none.
func (h Hasher) BlockHashes(tokens []int32, blockSize int, salt string) []Hash {
	if blockSize <= 0 {
		return nil
	}
	out := make([]Hash, 0, len(tokens)/blockSize)
	for i := 0; (i+1)*blockSize <= len(tokens); i++ {
		block := tokens[i*blockSize : (i+1)*blockSize]
		if i == 0 {
			out = append(out, h.First(block, salt))
		} else {
			out = append(out, h.Next(out[i-1], block))
		}
	}
	return out
}

// RootHash returns sha256_cbor's NONE_HASH for PYTHONHASHSEED=seed: the
// hash of the seed string itself (SHA256CBOR.Root).
func RootHash(seed string) Hash { return SHA256CBOR.Root(seed) }

// HashBlock returns the sha256_cbor hash of one full block of tokens whose
// parent block hashes to parent (RootHash for the first block). salt, when
// not empty, is the request's cache_salt: vLLM adds it to the extra keys of
// the first block only, and later blocks inherit it through the chain, so
// pass it for the first block and "" for the rest. A Hasher covers the
// other algorithms and LoRA names.
func HashBlock(parent Hash, tokens []int32, salt string) Hash {
	var extra []string
	if salt != "" {
		extra = []string{salt}
	}
	return SHA256CBOR.Block(parent[:], tokens, extra)
}

// BlockHashes returns the chained sha256_cbor hash of every full block of
// tokens, blockSize tokens each, with DefaultHashSeed's root: the zero
// Hasher's BlockHashes. salt is the request's cache_salt, "" for none.
func BlockHashes(tokens []int32, blockSize int, salt string) []Hash {
	return defaultHasher.BlockHashes(tokens, blockSize, salt)
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

// cborBlock returns the canonical CBOR of the 3-tuple (parent,
// tuple(tokens), extra), extra being None when empty; cbor2.dumps(...,
// canonical=True) writes every head in its shortest form, which is all
// canonical means for these types (no maps, no floats).
func cborBlock[T int32 | int64](parent []byte, tokens []T, extra []string) []byte {
	size := 3 + 9 + len(parent) + 9 + 9*len(tokens) + 9
	for _, s := range extra {
		size += 9 + len(s)
	}
	b := make([]byte, 0, size)
	b = cborHead(b, majorArray, 3)
	b = cborHead(b, majorBytes, uint64(len(parent)))
	b = append(b, parent...)
	b = cborHead(b, majorArray, uint64(len(tokens)))
	for _, t := range tokens {
		if t >= 0 {
			b = cborHead(b, majorUint, uint64(t))
		} else {
			b = cborHead(b, majorNegInt, uint64(-1-int64(t)))
		}
	}
	if len(extra) == 0 {
		return append(b, cborNull) // vLLM's extra keys are None, not an empty tuple
	}
	b = cborHead(b, majorArray, uint64(len(extra)))
	for _, s := range extra {
		b = cborText(b, s)
	}
	return b
}

func cborText(b []byte, s string) []byte {
	b = cborHead(b, majorText, uint64(len(s)))
	return append(b, s...)
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

package blockhash

import (
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// HashFunc computes a block's key from the key of the block before it in
// the prompt (Root for the first block) and the block's own tokens.
//
// Chaining the parent's key in is what makes equal keys stand for equal
// prefixes rather than equal blocks: two prompts that end in the same block
// of tokens after different beginnings get different keys, because the KV
// of those tokens differs too.
type HashFunc func(parent uint64, tokens []int32) uint64

// Root is the parent key of every prompt's first block. It is FNV-1a's
// offset basis, so that FNV1a(Root, prefix) is the plain FNV-1a hash of the
// prefix.
const Root uint64 = 14695981039346656037

// FNV1a continues a 64-bit FNV-1a hash from state parent over the tokens'
// bytes, little-endian. Because FNV-1a is a running state, chaining it block
// by block gives exactly the hash of the whole prefix: the chain costs
// nothing extra, but every byte costs one multiply in sequence.
func FNV1a(parent uint64, tokens []int32) uint64 {
	const prime = 1099511628211
	h := parent
	for _, t := range tokens {
		u := uint32(t)
		h = (h ^ uint64(u&0xff)) * prime
		h = (h ^ uint64(u>>8&0xff)) * prime
		h = (h ^ uint64(u>>16&0xff)) * prime
		h = (h ^ uint64(u>>24)) * prime
	}
	return h
}

// XXHash folds the 64-bit xxHash of the tokens' bytes into parent. xxHash
// reads 32 bytes per round in four independent lanes (in assembly on
// amd64 and arm64), many times faster than FNV1a's one multiply per byte;
// it is the Cache's default.
func XXHash(parent uint64, tokens []int32) uint64 {
	return fold(parent, xxhash.Sum64(bytesOf(tokens)))
}

// fold combines a parent key with a block's own hash. Scaling parent by an
// odd constant and adding h is one-to-one in each argument (no two blocks
// under one parent, and no two parents of one block, can meet), and
// splitmix64's finaliser then spreads every input bit over the key.
func fold(parent, h uint64) uint64 {
	z := parent*0x9e3779b97f4a7c15 + h
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// bytesOf views tokens as bytes in memory order, without copying. The keys
// it produces are for this process's index only, so byte order is moot.
func bytesOf(tokens []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
}

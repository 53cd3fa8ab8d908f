package blockhash

import (
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
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

// SaltRoot returns the parent key of the first block of a prompt whose
// request carries cache salt salt: Root without a salt, else Root folded
// with the xxHash of the salt's bytes. Only the first block's key sees the
// salt; every later key chains from it, so a whole salted prompt keys
// apart from the same tokens unsalted. It is stable across processes, as
// XXHash is, so it suits every HashFunc.
func SaltRoot(salt string) uint64 {
	if salt == "" {
		return Root
	}
	return fold(Root, xxhash.Sum64String(salt))
}

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
// amd64 and arm64), where FNV1a waits on one multiply per byte.
// Its keys are stable: the same prefix gets the same key in every process
// on every machine of the same byte order, so keys can name blocks outside
// the process (to a router, in KV-cache events). Select it with
// WithHash(XXHash).
func XXHash(parent uint64, tokens []int32) uint64 {
	return fold(parent, xxhash.Sum64(bytesOf(tokens)))
}

// MapHash combines parent with the runtime's own hash of the tokens' bytes
// (hash/maphash, the hash Go maps use, built on the CPU's AES instructions
// where it has them). It is the Cache's default: keys live only in this
// process's index, so they need not be stable, and the AES rounds mix 16
// bytes per instruction (`go test -run '^$' -bench '^BenchmarkHash$'
// ./phase08_hashcow/` times each hash per token). Its seed is drawn once
// per process, so its keys differ from one process to the next: never
// send them anywhere; use XXHash for that. A seed an attacker cannot know
// also keeps them from choosing prompts whose keys collide, though a
// collision would cost only a miss.
//
// maphash's output is already spread over all 64 bits, so one multiply
// and an xor chain it to parent, where fold spends three: the result is
// still one-to-one in each argument (an odd multiplier is invertible), and
// the chain of keys, which every block of a walk waits on, stays short.
func MapHash(parent uint64, tokens []int32) uint64 {
	return parent*0x9e3779b97f4a7c15 ^ maphash.Bytes(processSeed, bytesOf(tokens))
}

// processSeed seeds MapHash for the life of the process.
var processSeed = maphash.MakeSeed()

// WordHash combines parent with a hash of the tokens read as 8-byte words:
// each pair of words is multiplied out to 128 bits (bits.Mul64) and the
// halves xored, as wyhash does, after both are xored with secrets drawn
// once per process — the first secret stepping by an odd constant per pair,
// so that pairs in another order hash differently. The pairs are
// independent, so a 16-token block is four multiplies side by side and one
// more to chain parent in, with no call into the runtime (maphash.Bytes
// goes through its generic memhash). Select it with WithHash(WordHash). It
// is not the default: where the CPU has AES instructions, memhash hashes a
// block in a few AES rounds, and Match keyed by MapHash came out faster
// (`go test -run '^$' -bench MatchHash ./phase08_hashcow/` times Match with
// each hash).
//
// It is no stronger than it needs to be: a key is only a hint, and every
// hit is verified against the block's tokens, its parent and its salt, so
// a collision costs a miss, never wrong KV. Its secrets are per process, as
// MapHash's seed is: the keys mean nothing outside it (use XXHash there),
// and prompts cannot be chosen to collide without knowing them.
func WordHash(parent uint64, tokens []int32) uint64 {
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(tokens))), len(tokens)/2)
	s0, s1 := wordSecret[0], wordSecret[1]
	acc := uint64(len(tokens)) ^ wordSecret[2]
	for ; len(words) >= 2; words = words[2:] {
		acc ^= mum(words[0]^s0, words[1]^s1)
		s0 += 0x9e3779b97f4a7c15
	}
	if len(words) == 1 {
		acc ^= mum(words[0]^s0, s1^0x94d049bb133111eb)
		s0 += 0x9e3779b97f4a7c15
	}
	if len(tokens)%2 == 1 {
		acc ^= mum(uint64(uint32(tokens[len(tokens)-1]))^s0, s1^0xbf58476d1ce4e5b9)
	}
	return mum(acc^wordSecret[3], parent^s1)
}

// mum multiplies a and b to 128 bits and folds the halves together.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// wordSecret keys WordHash for the life of the process. math/rand/v2's
// top-level generator is seeded from the runtime's entropy at start-up.
var wordSecret = [4]uint64{rand.Uint64() | 1, rand.Uint64() | 1, rand.Uint64(), rand.Uint64()}

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

// bytesOf views tokens as bytes in memory order, without copying: little
// endian on every platform Go's amd64 and arm64 ports run, which is what
// keeps XXHash's keys the same from one such machine to another.
func bytesOf(tokens []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
}

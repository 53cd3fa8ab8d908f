package blockhash

import (
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
)

// An index keyed by vLLM's own block hash (WithVLLMHash) differs from the
// default in one thing: the chain from block to block carries the parent's
// whole 32-byte hash, not a 64-bit key, and the salt enters the first
// block's hash instead of the root. Everything after the key is the same:
// the table, the check of every hit (holds), the eviction queue. So the
// walk and the commit for that index are here, beside the default ones
// (match.go, insert.go), which stay free of it.

// vllmHashes is what a cache keyed by vLLM's block hash adds: the chain's
// root and every cached block's full 32-byte hash, which the next block's
// hash is computed from. The index keeps only 64 bits of it, so the chain
// could not continue from a cached parent without the rest.
type vllmHashes struct {
	hasher kvevents.Hasher // the algorithm, root and LoRA name of the chains
	root   kvevents.Hash
	hashes []kvevents.Hash // hashes[b]: cached block b's hash
}

// hash returns the hash of block after parent: the first block's, which
// takes the salt, when first; the salt is inherited through the chain.
func (v *vllmHashes) hash(parent kvevents.Hash, first bool, block []int32, salt string) kvevents.Hash {
	if first {
		return v.hasher.First(block, salt)
	}
	return v.hasher.Next(parent, block)
}

// WithVLLMHash keys every cached block by the hash vLLM gives it
// (kvevents.HashBlock: SHA-256 over the CBOR of the parent's hash, the
// block's tokens and, for a prompt's first block only, the cache salt),
// rooted at kvevents.RootHash(seed), the root of a vLLM replica started
// with PYTHONHASHSEED=seed. The index is keyed by the hash's Uint64 form and
// keeps the whole hash per cached block (VLLMHash), so a block's key is the
// one a router or a vLLM replica computes for the same prefix and salt.
// Every hit is still verified against the stored tokens, the parent and the
// salt, as with any HashFunc. It costs a SHA-256 per block on every walk
// and a CBOR buffer to feed it, where the default hash is a few AES rounds
// (`go test -run '^$' -bench MatchHash ./phase08_hashcow/` times Match
// keyed by each; docs/phase08_hashcow.md, "vLLM's block hash as the key").
func WithVLLMHash(seed string) Option {
	return WithVLLMHasher(kvevents.NewHasher(kvevents.SHA256CBOR, seed, ""))
}

// WithVLLMHasher is WithVLLMHash under any of vLLM's algorithms, roots
// and LoRA names: the keys are then the hashes the KV events carry when
// serve runs with the same -prefix-caching-hash-algo, -kv-hash-seed and
// -lora-name.
func WithVLLMHasher(h kvevents.Hasher) Option {
	return func(c *Cache) {
		c.vllm = &vllmHashes{hasher: h, root: h.Root(), hashes: make([]kvevents.Hash, len(c.blocks))}
	}
}

// VLLMPrefixCache is PrefixCache with WithVLLMHasher(h).
func VLLMPrefixCache(h kvevents.Hasher) func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
	return func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
		return New(a, blockSize, WithVLLMHasher(h))
	}
}

// VLLMHash returns the vLLM block hash cached block b is keyed by, and
// false when b is not cached or the cache was not built WithVLLMHash.
func (c *Cache) VLLMHash(b int32) (kvevents.Hash, bool) {
	if c.vllm == nil || c.blocks[b].serial == 0 {
		return kvevents.Hash{}, false
	}
	return c.vllm.hashes[b], true
}

// walkVLLM is walk for a cache keyed by vLLM's block hash: the chain
// carries the parent's whole hash, and the salt enters the first block's
// hash rather than the root.
func (c *Cache) walkVLLM(salt string, tokens []int32, dst []int32, take bool) []int32 {
	full, parent := c.vllm.root, uint64(0)
	for end := c.bs; end <= len(tokens); end += c.bs {
		block := tokens[end-c.bs : end]
		full = c.vllm.hash(full, end == c.bs, block, salt)
		b, ok := c.index.get(full.Uint64())
		if !ok || !c.holds(b, parent, salt, block) {
			break
		}
		dst = append(dst, b)
		parent, salt = c.blocks[b].serial, ""
		if take {
			c.take(b)
		}
	}
	return dst
}

// insertVLLM is Insert's walk for a cache keyed by vLLM's block hash: the
// chain carries the whole hash of the block it continues from, and every
// block that becomes an entry records its own, for the chain of a later
// commit and for VLLMHash. A page of seq's that is cached already under
// seq's salt reuses its stored hash, as Insert reuses a stored key: no
// SHA-256 for blocks an earlier commit of the same tokens hashed.
func (c *Cache) insertVLLM(salt string, tokens []int32, pages []int32) {
	full, parent := c.vllm.root, uint64(0)
	for i := 0; (i+1)*c.bs <= len(tokens); i++ {
		b, block := pages[i], tokens[i*c.bs:(i+1)*c.bs]
		if c.blocks[b].serial != 0 && c.saltOf(b) == salt {
			full = c.vllm.hashes[b] // its tokens, prefix and salt are seq's: the same hash
		} else {
			full = c.vllm.hash(full, i == 0, block, salt)
		}
		entry := c.place(b, full.Uint64(), parent, salt, i, block)
		if entry == b {
			c.vllm.hashes[b] = full
		}
		full = c.vllm.hashes[entry] // the reachable copy: the same prefix, the same hash
		parent, salt = c.blocks[entry].serial, ""
	}
}

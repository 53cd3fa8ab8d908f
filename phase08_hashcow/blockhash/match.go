package blockhash

import (
	"bytes"
	"fmt"

	"kvlab/common/kvevents"
)

// Match takes a reference on every block of the longest prefix of tokens
// cached under salt for seq, until Release(seq). The returned slice is the cache's
// own; the caller copies it and must not modify it.
func (c *Cache) Match(seq int, salt string, tokens []int32) (blocks []int32, matched int) {
	if _, dup := c.users[seq]; dup {
		panic(fmt.Sprintf("blockhash: sequence %d matched twice without a release", seq))
	}
	blocks = c.walk(salt, tokens, c.takeList())
	if len(blocks) == 0 {
		c.spare = append(c.spare, blocks)
		return nil, 0
	}
	c.clock++
	for _, b := range blocks {
		c.alloc.Incref(b)
		c.blocks[b].users++
		c.blocks[b].used = c.clock
		c.pin(b)
	}
	c.users[seq] = blocks
	return blocks, len(blocks) * c.bs
}

// MatchLen returns the number of tokens Match would reuse, touching nothing.
func (c *Cache) MatchLen(salt string, tokens []int32) int {
	blocks := c.walk(salt, tokens, c.takeList())
	c.spare = append(c.spare, blocks)
	return len(blocks) * c.bs
}

// walk appends to dst the cached blocks holding the longest prefix of
// tokens made of whole blocks, cached under salt.
func (c *Cache) walk(salt string, tokens []int32, dst []int32) []int32 {
	if c.vllm != nil {
		return c.walkVLLM(salt, tokens, dst)
	}
	key, parent := SaltRoot(salt), uint64(0)
	for end := c.bs; end <= len(tokens); end += c.bs {
		block := tokens[end-c.bs : end]
		key = c.hash(key, block)
		b, ok := c.index.get(key)
		if !ok || !c.holds(b, parent, salt, block) {
			break
		}
		dst = append(dst, b)
		parent, salt = c.blocks[b].serial, "" // later blocks inherit the salt
	}
	return dst
}

// walkVLLM is walk for a cache keyed by vLLM's block hash: the chain
// carries the parent's whole hash, and the salt enters the first block's
// hash rather than the root.
func (c *Cache) walkVLLM(salt string, tokens []int32, dst []int32) []int32 {
	full, parent := c.vllm.root, uint64(0)
	for end := c.bs; end <= len(tokens); end += c.bs {
		block := tokens[end-c.bs : end]
		full = kvevents.HashBlock(full, block, salt)
		b, ok := c.index.get(full.Uint64())
		if !ok || !c.holds(b, parent, salt, block) {
			break
		}
		dst = append(dst, b)
		parent, salt = c.blocks[b].serial, ""
	}
	return dst
}

// holds reports whether cached block b is the child of the block with
// serial parent (0 for a first block, whose salt must then be salt) and
// stores exactly block: the check that turns a key hit into a real hit.
// Comparing the tokens catches a hash collision; comparing the parent
// catches a chain that reached b through another prefix; comparing a first
// block's salt catches a key that another tenant's first block collides
// with. Every first block has parent 0 whatever its salt, so without that
// last comparison only the key would keep tenants apart.
func (c *Cache) holds(b int32, parent uint64, salt string, block []int32) bool {
	info := &c.blocks[b]
	return info.parent == parent && info.salt == salt && bytes.Equal(bytesOf(c.tokensOf(b)), bytesOf(block))
}

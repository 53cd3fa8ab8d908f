package blockhash

import (
	"bytes"
	"fmt"
)

// Match takes a reference on every block of the longest cached prefix of
// tokens for seq, until Release(seq). The returned slice is the cache's
// own; the caller copies it and must not modify it.
func (c *Cache) Match(seq int, tokens []int32) (blocks []int32, matched int) {
	if _, dup := c.users[seq]; dup {
		panic(fmt.Sprintf("blockhash: sequence %d matched twice without a release", seq))
	}
	blocks = c.walk(tokens, c.takeList())
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
func (c *Cache) MatchLen(tokens []int32) int {
	blocks := c.walk(tokens, c.takeList())
	c.spare = append(c.spare, blocks)
	return len(blocks) * c.bs
}

// walk appends to dst the cached blocks holding the longest prefix of
// tokens made of whole blocks.
func (c *Cache) walk(tokens []int32, dst []int32) []int32 {
	key, parent := Root, uint64(0)
	for end := c.bs; end <= len(tokens); end += c.bs {
		block := tokens[end-c.bs : end]
		key = c.hash(key, block)
		b, ok := c.index.get(key)
		if !ok || !c.holds(b, parent, block) {
			break
		}
		dst = append(dst, b)
		parent = c.blocks[b].serial
	}
	return dst
}

// holds reports whether cached block b is the child of the block with
// serial parent and stores exactly block: the check that turns a key hit
// into a real hit. Comparing the tokens catches a hash collision; comparing
// the parent catches a chain that reached b through another prefix.
func (c *Cache) holds(b int32, parent uint64, block []int32) bool {
	return c.blocks[b].parent == parent && bytes.Equal(bytesOf(c.tokensOf(b)), bytesOf(block))
}

package blockhash

import (
	"bytes"
	"fmt"
)

// Match takes a reference on every block of the longest prefix of tokens
// cached under salt for seq, until Release(seq). The returned slice is the cache's
// own; the caller copies it and must not modify it.
func (c *Cache) Match(seq int, salt string, tokens []int32) (blocks []int32, matched int) {
	if _, dup := c.users[seq]; dup {
		panic(fmt.Sprintf("blockhash: sequence %d matched twice without a release", seq))
	}
	c.clock++
	blocks = c.walkFast(salt, tokens, c.takeList(), true) // walk, in chunks (match_fast.go)
	if len(blocks) == 0 {
		c.spare = append(c.spare, blocks)
		return nil, 0
	}
	c.users[seq] = blocks
	return blocks, len(blocks) * c.bs
}

// MatchLen returns the number of tokens Match would reuse, touching nothing.
func (c *Cache) MatchLen(salt string, tokens []int32) int {
	blocks := c.walkFast(salt, tokens, c.takeList(), false)
	c.spare = append(c.spare, blocks)
	return len(blocks) * c.bs
}

// walk appends to dst the cached blocks holding the longest prefix of
// tokens made of whole blocks, cached under salt. With take, it also gives
// each one a user (Match); without, it changes nothing (MatchLen).
//
// It goes block by block: the block's key, chained from the one before;
// the block the index holds under it; and the check that makes that block
// a hit (holds). The first miss ends the walk. This is the walk to read.
// Match and MatchLen run walkFast, which does the same in chunks of blocks
// (TestWalkFastAgreesWithWalk and FuzzWalkFast check that the two agree),
// and, for an index keyed by vLLM's hash, walkVLLM.
func (c *Cache) walk(salt string, tokens []int32, dst []int32, take bool) []int32 {
	key, parent := SaltRoot(salt), uint64(0)
	for end := c.bs; end <= len(tokens); end += c.bs {
		block := tokens[end-c.bs : end]
		key = c.next(key, block)
		b, ok := c.index.get(key)
		if !ok || !c.holds(b, parent, salt, block) {
			break
		}
		dst = append(dst, b)
		parent, salt = c.blocks[b].serial, "" // later blocks inherit the salt
		if take {
			c.take(b)
		}
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
	return info.parent == parent && (parent != 0 || c.saltOf(b) == salt) && bytes.Equal(bytesOf(c.tokensOf(b)), bytesOf(block))
}

// take gives cached block b one more user, matched at the current clock:
// an allocator reference for the sequence, one more in the block's count
// of users, its last use, and out of the eviction queue if it was there.
func (c *Cache) take(b int32) {
	c.alloc.Incref(b)
	info := &c.blocks[b]
	c.addUser(info, b)
	info.ord = pack(c.clock, info.depth())
	c.pin(b)
}

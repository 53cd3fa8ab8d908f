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
	c.clock++
	blocks = c.walk(salt, tokens, c.takeList(), true)
	if len(blocks) == 0 {
		c.spare = append(c.spare, blocks)
		return nil, 0
	}
	c.users[seq] = blocks
	return blocks, len(blocks) * c.bs
}

// MatchLen returns the number of tokens Match would reuse, touching nothing.
func (c *Cache) MatchLen(salt string, tokens []int32) int {
	blocks := c.walk(salt, tokens, c.takeList(), false)
	c.spare = append(c.spare, blocks)
	return len(blocks) * c.bs
}

// take gives cached block b one more user, matched at the current clock:
// Match's part of the walk, done while b's record is at hand rather than
// in a second pass over the blocks.
func (c *Cache) take(b int32) {
	c.alloc.Incref(b)
	info := &c.blocks[b]
	info.users++
	info.ord = pack(c.clock, info.depth())
	if info.inLRU >= 0 {
		c.pin(b)
	}
}

// walk appends to dst the cached blocks holding the longest prefix of
// tokens made of whole blocks, cached under salt. With take, it also gives
// each one a user (Match); without, it changes nothing (MatchLen).
func (c *Cache) walk(salt string, tokens []int32, dst []int32, take bool) []int32 {
	if c.vllm != nil {
		return c.walkVLLM(salt, tokens, dst, take)
	}
	key, parent := SaltRoot(salt), uint64(0)
	// The cache's fields in locals: the stores into a block's record below
	// could alias them as far as the compiler knows, so it would reload
	// each one every block.
	bs, hash, index, infos, stored := c.bs, c.hash, c.index, c.blocks, c.tokens
	for rest := tokens; len(rest) >= bs; rest = rest[bs:] {
		block := rest[:bs:bs]
		// c.next and c.holds, written out: next is past the compiler's
		// inlining budget, and written here the default hash is a direct,
		// inlined call instead of one through a function value, and holds
		// reads the locals above.
		if hash == nil {
			key = MapHash(key, block)
		} else {
			key = hash(key, block)
		}
		b, ok := index.get(key)
		if !ok {
			break
		}
		info := &infos[b]
		// Only a first block (parent 0: serials start at 1) records a salt.
		if info.parent != parent || parent == 0 && c.saltOf(b) != salt || !bytes.Equal(bytesOf(stored[int(b)*bs:int(b)*bs+bs]), bytesOf(block)) {
			break
		}
		dst = append(dst, b)
		parent, salt = info.serial, "" // later blocks inherit the salt
		// c.take, written out: it is past the inlining budget too.
		if take {
			c.alloc.Incref(b)
			info.users++
			info.ord = pack(c.clock, info.depth())
			if info.inLRU >= 0 {
				c.pin(b)
			}
		}
	}
	return dst
}

// walkVLLM is walk for a cache keyed by vLLM's block hash: the chain
// carries the parent's whole hash, and the salt enters the first block's
// hash rather than the root.
func (c *Cache) walkVLLM(salt string, tokens []int32, dst []int32, take bool) []int32 {
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

package blockhash

import "unsafe"

// walkFast is walk, the walk Match and MatchLen run: the same blocks, the
// same users, in chunks of walkChunk blocks. First it hashes a chunk's
// blocks (keys), then it looks the keys up, checks the hits and takes them
// (verify), stopping at the first miss or failed check. Only the hashing
// calls out, into the runtime's hash, once per block; in one loop that did
// everything, that call made the compiler keep the walk's dozen or more
// live values on the stack and reload them every block. A chunk's blocks
// past a miss are hashed for nothing, at most walkChunk − 1 of them per
// walk. TestWalkFastAgreesWithWalk and FuzzWalkFast check it against walk.
func (c *Cache) walkFast(salt string, tokens []int32, dst []int32, take bool) []int32 {
	if c.vllm != nil {
		return c.walkVLLM(salt, tokens, dst, take)
	}
	bs := c.bs
	key, parent := SaltRoot(salt), uint64(0)
	var keys [walkChunk]uint64
	for len(tokens) >= bs {
		m := min(walkChunk, len(tokens)/bs)
		key = c.keys(keys[:m], key, tokens)
		var ok bool
		if dst, parent, ok = c.verify(keys[:m], tokens, dst, parent, salt, take); !ok {
			break
		}
		tokens, salt = tokens[m*bs:], "" // later blocks inherit the salt
	}
	return dst
}

// walkChunk is how many blocks walkFast hashes before it looks any up.
const walkChunk = 16

// keys fills keys with the chained keys of the first len(keys) blocks of
// tokens, continuing from parent, and returns the last.
func (c *Cache) keys(keys []uint64, parent uint64, tokens []int32) uint64 {
	bs, hash := c.bs, c.hash
	for i := range keys {
		block := tokens[i*bs : i*bs+bs : i*bs+bs]
		// The default hash is a direct, inlined call rather than one
		// through a function value.
		if hash == nil {
			parent = MapHash(parent, block)
		} else {
			parent = hash(parent, block)
		}
		keys[i] = parent
	}
	return parent
}

// verify is the rest of walkFast for one chunk, in three loops with no
// calls: the blocks the table holds under the keys, up to the first miss
// (table.lookup); of those, the ones that pass the check of Cache.holds in
// turn, each the child of the one before (the first of the serial parent,
// 0 for a prompt's first block, whose salt must then be salt) and holding
// its block of tokens; and, with take, a user for each at the current
// clock (Cache.take). It returns dst with the blocks that passed, the
// serial of the last, and whether all of them did.
func (c *Cache) verify(keys []uint64, tokens, dst []int32, parent uint64, salt string, take bool) ([]int32, uint64, bool) {
	var found [walkChunk]int32
	hits := found[:c.index.lookup(keys, found[:len(keys)])]
	if len(hits) > 0 && parent == 0 && c.saltOf(hits[0]) != salt {
		// Only a first block (parent 0: serials start at 1) records a salt.
		return dst, parent, false
	}
	// The cache's fields in locals: the stores into a block's record below
	// could alias them as far as the compiler knows, so it would reload
	// each one every block.
	bs, infos, stored := c.bs, c.blocks, c.tokens
	width := uintptr(bs) * 4 // bytes a block
	n := 0
	for ; n < len(hits); n++ {
		b := hits[n]
		info := &infos[b]
		if info.parent != parent {
			break
		}
		// The stored tokens against the prompt's, written out: 64 bytes at
		// a time as eight 8-byte words, xored and ored together, then 4
		// at a time; one branch per block. bytes.Equal calls the runtime's
		// memequal, which first picks its method by length, and a function
		// doing this is past the inlining budget.
		x := unsafe.Pointer(&stored[int(b)*bs])
		y := unsafe.Pointer(&tokens[n*bs])
		var diff uint64
		i := uintptr(0)
		for ; i+64 <= width; i += 64 {
			p, q := (*[8]uint64)(unsafe.Add(x, i)), (*[8]uint64)(unsafe.Add(y, i))
			diff |= (p[0] ^ q[0]) | (p[1] ^ q[1]) | (p[2] ^ q[2]) | (p[3] ^ q[3]) | (p[4] ^ q[4]) | (p[5] ^ q[5]) | (p[6] ^ q[6]) | (p[7] ^ q[7])
		}
		for ; i < width; i += 4 {
			diff |= uint64(*(*uint32)(unsafe.Add(x, i)) ^ *(*uint32)(unsafe.Add(y, i)))
		}
		if diff != 0 {
			break
		}
		parent = info.serial
	}
	hits = hits[:n]
	if take {
		used := uint64(c.clock) << depthBits
		for _, b := range hits {
			c.alloc.Incref(b)
			info := &infos[b]
			// The new clock above the depth the block's order holds (pack).
			info.ord = used | info.ord&depthMask
			if info.link < usersMax<<usersShift {
				info.link += 1 << usersShift // c.addUser, the common case
			} else {
				c.addUser(info, b)
			}
			if info.link&linkMask != 0 || c.lru.head == b { // c.lru.has(b)
				c.pin(b)
			}
		}
	}
	return append(dst, hits...), parent, n == len(keys)
}

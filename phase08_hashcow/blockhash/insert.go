package blockhash

// Insert indexes every full block of tokens that is not cached yet, taking
// one reference on each for the index. It adopts none of seq's pages: the
// sequence keeps its own reference, so lent comes back unchanged.
func (c *Cache) Insert(seq int, tokens []int32, pages []int32, lent int) int {
	c.clock++
	key, parent := Root, uint64(0)
	for i := 0; (i+1)*c.bs <= len(tokens); i++ {
		b, block := pages[i], tokens[i*c.bs:(i+1)*c.bs]
		if c.blocks[b].serial != 0 { // lent by Match, or inserted before
			key = c.blocks[b].key
		} else {
			key = c.hash(key, block)
			have, ok := c.index.get(key)
			if ok && c.holds(have, parent, block) {
				// Computed twice (two prompts admitted before either was
				// cached): the cached copy stands, seq's stays its own.
				b = have
			} else {
				// A key held by a block that fails the check is stale (its
				// parent was evicted, so no walk reaches it) or collides:
				// the new block takes the key. The old one keeps its
				// reference and, being unreachable, is reclaimed first.
				if ok {
					c.blocks[have].used = 0
					c.lru.fix(have)
				}
				c.add(b, key, parent, i, block)
			}
		}
		c.touch(b)
		parent = c.blocks[b].serial
	}
	return lent
}

// add caches block b under key.
func (c *Cache) add(b int32, key, parent uint64, depth int, block []int32) {
	c.alloc.Incref(b)
	c.serial++
	c.blocks[b] = blockInfo{serial: c.serial, parent: parent, key: key, depth: int32(depth), inLRU: -1}
	copy(c.tokensOf(b), block)
	c.index.put(key, b)
	c.pinned = append(c.pinned, b) // seq holds it too
	c.cached++
}

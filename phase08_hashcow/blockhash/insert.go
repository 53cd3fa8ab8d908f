package blockhash

// Insert indexes every full block of tokens that is not cached yet, taking
// one reference on each for the index. It adopts none of seq's pages: the
// sequence keeps its own reference, so lent comes back unchanged.
//
// It walks the prompt as Match would and continues, block by block, from
// the entry a walk reaches: the block the index holds under the key, if
// that block is the child of the one before it and holds these tokens.
// Only where no such entry exists does seq's page become the entry, so a
// commit extends what is reachable and never replaces it (place). Seq's
// page being cached already proves nothing: it may hang under a parent
// that was evicted since, and continuing from it would make every later
// block's parent check fail against the entries a walk does reach
// (PITFALLS.md, "Continuing a chain from an orphaned block").
//
// The blocks go under salt, the one seq matched with: its first key starts
// from SaltRoot(salt) and its first block records salt.
func (c *Cache) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	c.clock++
	if c.vllm != nil {
		c.insertVLLM(salt, tokens, pages) // the same walk, keyed by vLLM's hash (vllm.go)
		return lent
	}
	key, parent := SaltRoot(salt), uint64(0)
	for i := 0; (i+1)*c.bs <= len(tokens); i++ {
		b, block := pages[i], tokens[i*c.bs:(i+1)*c.bs]
		if c.blocks[b].serial != 0 && c.saltOf(b) == salt {
			key = c.blocks[b].key // its tokens, prefix and salt are seq's: the same key, unhashed
		} else {
			key = c.next(key, block)
		}
		b = c.place(b, key, parent, salt, i, block)
		parent, salt = c.blocks[b].serial, "" // later blocks inherit the salt
	}
	return lent
}

// place makes sure a walk finds block under key, at depth i below the
// block with serial parent (0 for a first block, cached under salt), and
// returns the block it finds there: b, seq's page holding block, or the
// copy another sequence cached first. It marks the block used now.
func (c *Cache) place(b int32, key, parent uint64, salt string, i int, block []int32) int32 {
	mine := &c.blocks[b]
	have, ok := c.index.get(key)
	switch {
	case ok && have == b && mine.parent == parent && c.saltOf(b) == salt:
		// Lent by Match, or inserted before: already reachable.
	case ok && have != b && c.holds(have, parent, salt, block):
		// Computed twice (two prompts admitted before either was
		// cached): the reachable copy stands, seq's stays its own. If
		// seq's copy is cached too, it is orphaned; reclaim it first.
		if mine.serial != 0 {
			c.forget(b)
		}
		b = have
	default:
		// No reachable entry. A key held by a block that fails the
		// check is stale (its parent was evicted, so no walk reaches
		// it) or collides: seq's block takes the key. The old one
		// keeps its reference and, being unreachable, is reclaimed
		// first.
		if ok && have != b {
			c.forget(have)
		}
		if mine.serial != 0 {
			// Cached under a parent that is gone: hang it under this
			// one. Its serial stays, so its children stay its own.
			mine.parent, mine.key = parent, key
			c.setSalt(b, salt)
			c.index.put(key, b)
		} else {
			c.add(b, key, parent, salt, i, block)
		}
	}
	c.touch(b)
	return b
}

// forget marks cached block b unreachable: it is reclaimed before any
// block a walk can still reach.
func (c *Cache) forget(b int32) {
	info := &c.blocks[b]
	info.ord = pack(0, info.depth())
	if c.lru.has(b) {
		c.lru.remove(b)
		c.lru.pushFront(b)
	}
}

// add caches block b under key; salt is a first block's cache salt ("" for
// later blocks).
func (c *Cache) add(b int32, key, parent uint64, salt string, depth int, block []int32) {
	c.alloc.Incref(b)
	c.serial++
	c.blocks[b] = blockInfo{serial: c.serial, parent: parent, key: key, ord: pack(0, depth)}
	c.setSalt(b, salt)
	copy(c.tokensOf(b), block)
	c.index.put(key, b)
	c.pinned = append(c.pinned, b) // seq holds it too
	c.cached++
}

package blockhash

// unreachable is a parent serial no block ever has (serials count up from
// 1): a block given it fails every walk's check (holds).
const unreachable = ^uint64(0)

// Forget drops the cached prefix tokens under salt, from its last whole
// block down, with every block cached below it (kvcache.Forgetter): the
// block a walk of tokens ends on, and every block whose chain of parents
// reaches it. Blocks before it, and its siblings, stay cached.
//
// A dropped block only the index holds leaves the index and gives its
// reference back at once. One a sequence still holds (through Match, or as
// a page the index shares with it) cannot simply be uncached: the
// record's count of Match users must live until Release. It leaves the
// index and is marked unreachable instead (no walk's check passes), so it
// is never lent again, and it is reclaimed before any reachable block once
// only the index holds it: the stale entries Insert already makes.
func (c *Cache) Forget(salt string, tokens []int32) (dropped int) {
	want := len(tokens) / c.bs
	if want == 0 {
		return 0
	}
	path := c.walkFast(salt, tokens[:want*c.bs], c.takeList(), false)
	defer func() { c.spare = append(c.spare, path[:0]) }()
	if len(path) < want {
		return 0 // the block is not cached
	}
	top := c.blocks[path[want-1]].serial
	// below[s] reports whether the block with serial s is top or under it.
	bySerial := make(map[uint64]int32, c.cached)
	for i := range c.blocks {
		if s := c.blocks[i].serial; s != 0 {
			bySerial[s] = int32(i)
		}
	}
	below := map[uint64]bool{top: true}
	var under func(s uint64) bool
	under = func(s uint64) bool {
		if v, ok := below[s]; ok {
			return v
		}
		b, ok := bySerial[s]
		if !ok {
			return false
		}
		p := c.blocks[b].parent
		v := p != 0 && p != unreachable && under(p)
		below[s] = v
		return v
	}
	var doomed []int32
	for s, b := range bySerial {
		if under(s) {
			doomed = append(doomed, b)
		}
	}
	for _, b := range doomed {
		dropped++
		info := &c.blocks[b]
		if have, ok := c.index.get(info.key); ok && have == b {
			c.index.delete(info.key)
		}
		if c.alloc.Refs(b) == 1 && c.lru.has(b) {
			c.lru.remove(b)
			c.drop(b)
			c.evicted--
			continue
		}
		info.parent = unreachable
		c.forget(b)
	}
	return dropped
}

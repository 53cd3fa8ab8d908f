package grammar

// maxMasks bounds the whole masks a matcher keeps (one bitset of
// vocab/8 bytes each: 32 KiB at 262144 tokens, so 1 MiB at most).
var maxMasks = 32 // a variable so a test can make it tiny

// maskEntry is the finished mask of one interned state over one
// vocabulary; used is the clock of its last hit, for eviction.
type maskEntry struct {
	v    *Vocab
	id   int32
	used uint64
	bits []uint64
}

// maskCache remembers the last masks Allowed computed, by interned state:
// inside a JSON string, or any char* loop, the matcher comes back to the
// same stack set token after token, and then the mask is a copy of a
// bitset instead of a walk of the trie. It lives in the dfa because a
// state id means something only there (a fresh dfa starts with none).
// Eviction is least recently used rather than clear-on-full: a document
// returns to a few hot states (inside a string, after a comma, inside a
// number) between rarer ones, and clearing would throw the hot ones away
// each time a 33rd state appeared.
type maskCache struct {
	entries []maskEntry
	clock   uint64
	hits    int // masks served from the cache, for tests
}

// get copies the mask of state id over v into dst; false: not cached.
func (c *maskCache) get(v *Vocab, id int32, dst []uint64) bool {
	for i := range c.entries {
		e := &c.entries[i]
		if e.id == id && e.v == v {
			c.clock++
			e.used = c.clock
			c.hits++
			copy(dst, e.bits)
			return true
		}
	}
	return false
}

// put stores a copy of the mask bits of state id over v, evicting the
// least recently used entry when full (its bitset is reused).
func (c *maskCache) put(v *Vocab, id int32, bits []uint64) {
	if maxMasks <= 0 {
		return
	}
	c.clock++
	if len(c.entries) < maxMasks {
		c.entries = append(c.entries, maskEntry{v: v, id: id, used: c.clock, bits: append([]uint64(nil), bits...)})
		return
	}
	old := 0
	for i := range c.entries {
		if c.entries[i].used < c.entries[old].used {
			old = i
		}
	}
	e := &c.entries[old]
	e.v, e.id, e.used = v, id, c.clock
	e.bits = append(e.bits[:0], bits...)
}

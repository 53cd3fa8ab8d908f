package blockhash

// table maps keys to blocks: an open-addressing hash table with linear
// probing. Keys are already good hashes, so a key's low bits pick its slot
// directly; a lookup is usually one load and one compare, several times
// cheaper than a Go map, which hashes its keys again.
type table struct {
	// slots has a power-of-two length at least twice the number of blocks,
	// so it is never more than half full and probes stay short. A slot with
	// block 0 is empty; others store the block id plus one.
	slots []slot
	mask  uint64
}

type slot struct {
	key   uint64
	block int32 // block id + 1; 0: empty
}

// newTable returns a table with room for n keys.
func newTable(n int) table {
	size := 2
	for size < 2*n {
		size *= 2
	}
	return table{slots: make([]slot, size), mask: uint64(size - 1)}
}

// get returns the block stored under key.
func (t *table) get(key uint64) (int32, bool) {
	for i := key & t.mask; ; i = (i + 1) & t.mask {
		switch s := t.slots[i]; {
		case s.block == 0:
			return 0, false
		case s.key == key:
			return s.block - 1, true
		}
	}
}

// put stores b under key, replacing what was there.
func (t *table) put(key uint64, b int32) {
	i := key & t.mask
	for t.slots[i].block != 0 && t.slots[i].key != key {
		i = (i + 1) & t.mask
	}
	t.slots[i] = slot{key, b + 1}
}

// delete removes key. Emptying a slot would cut the probe sequence of any
// key stored past it, so the keys after it move back instead (backward-shift
// deletion: no tombstones, so probes never grow longer over time).
func (t *table) delete(key uint64) {
	i := key & t.mask
	for ; t.slots[i].key != key || t.slots[i].block == 0; i = (i + 1) & t.mask {
		if t.slots[i].block == 0 {
			return // not there
		}
	}
	for j := (i + 1) & t.mask; t.slots[j].block != 0; j = (j + 1) & t.mask {
		// The key at j may move to the hole at i only if its home slot
		// does not lie cyclically in (i, j].
		if home := t.slots[j].key & t.mask; (j-home)&t.mask >= (j-i)&t.mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot{}
}

package ghost

// table maps chain keys to nodes: open addressing with linear probing
// over a power-of-two array, deletion by shifting the run back (no
// tombstones). The keys are hashes already, so their low bits pick the
// slot; a Go map would hash them again, and every Match and Insert looks
// up one key per block in every ghost.
type table struct {
	slots []slot
	mask  uint64
	n     int
}

type slot struct {
	key  uint64
	node int32 // none: empty
}

func newTable() table {
	t := table{}
	t.resize(16)
	return t
}

func (t *table) resize(size int) {
	old := t.slots
	t.slots = make([]slot, size)
	for i := range t.slots {
		t.slots[i].node = none
	}
	t.mask, t.n = uint64(size-1), 0
	for _, s := range old {
		if s.node != none {
			t.put(s.key, s.node)
		}
	}
}

// get returns the node under key, or none.
func (t *table) get(key uint64) int32 {
	for i := key & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.node == none || s.key == key {
			return s.node
		}
	}
}

// put maps key to node, replacing any node under it.
func (t *table) put(key uint64, node int32) {
	if 8*(t.n+1) > 7*len(t.slots) {
		t.resize(2 * len(t.slots))
	}
	for i := key & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.node == none {
			*s = slot{key, node}
			t.n++
			return
		}
		if s.key == key {
			s.node = node
			return
		}
	}
}

// delete removes key, shifting back the entries of its run that probed
// past it, so that every lookup still finds them.
func (t *table) delete(key uint64) {
	i := key & t.mask
	for ; t.slots[i].node != none; i = (i + 1) & t.mask {
		if t.slots[i].key == key {
			break
		}
	}
	if t.slots[i].node == none {
		return
	}
	t.n--
	for j := (i + 1) & t.mask; t.slots[j].node != none; j = (j + 1) & t.mask {
		home := t.slots[j].key & t.mask
		// Move j's entry into the hole at i unless its home lies
		// cyclically in (i, j]: then it is already where a probe finds it.
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i].node = none
}

// len returns the number of keys.
func (t *table) len() int { return t.n }

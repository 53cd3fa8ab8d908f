package blockhash

import "fmt"

// table maps keys to blocks: an open-addressing hash table with linear
// probing. Keys are already good hashes, so a key's low bits pick its slot
// directly; a lookup is usually one load and one compare, several times
// cheaper than a Go map, which hashes its keys again.
//
// A slot is one 64-bit word: the key's low 40 bits above the block id plus
// one, so the table costs 8 bytes a slot rather than the 16 of a key and a
// block id side by side (the id's 4 bytes would pad to 8). Two keys equal
// in their low 40 bits are one key to the table. That is harmless for the
// same reason any collision is: a key is only a hint, every hit is verified
// (Cache.holds), and Insert treats a slot held by a block that fails the
// check as a collision.
type table struct {
	// slots has a power-of-two length at least twice the number of blocks,
	// so it is never more than half full and probes stay short. A zero
	// slot is empty.
	slots []uint64
	mask  uint64
}

const (
	// slotBlockBits is how many low bits of a slot hold the block id plus
	// one; the key's low 64 − slotBlockBits bits sit above them.
	slotBlockBits = 24
	slotBlockMask = 1<<slotBlockBits - 1
	// maxTableBlocks is the most blocks a table can index: block id plus
	// one must fit in slotBlockBits.
	maxTableBlocks = slotBlockMask
)

// newTable returns a table with room for n keys, at most maxTableBlocks.
func newTable(n int) table {
	if n > maxTableBlocks {
		panic(fmt.Sprintf("blockhash: %d blocks; the index holds at most %d", n, maxTableBlocks))
	}
	size := 2
	for size < 2*n {
		size *= 2
	}
	return table{slots: make([]uint64, size), mask: uint64(size - 1)}
}

// tag is the part of key a slot keeps: its low 64 − slotBlockBits bits, in
// the slot's high bits. The mask is far narrower, so a slot's home (its
// key & mask) can be read back from the tag.
func tag(key uint64) uint64 { return key << slotBlockBits }

// home returns the slot a stored entry's key picks.
func (t *table) home(s uint64) uint64 { return s >> slotBlockBits & t.mask }

// find returns the slot holding key, or the empty slot ending its probe
// run.
func (t *table) find(key uint64) uint64 {
	k := tag(key)
	i := key & t.mask
	for s := t.slots[i]; s != 0 && s&^slotBlockMask != k; s = t.slots[i] {
		i = (i + 1) & t.mask
	}
	return i
}

// get returns the block stored under key.
func (t *table) get(key uint64) (int32, bool) {
	s := t.slots[t.find(key)]
	if s == 0 {
		return 0, false
	}
	return int32(s&slotBlockMask) - 1, true
}

// put stores b under key, replacing what was there.
func (t *table) put(key uint64, b int32) {
	t.slots[t.find(key)] = tag(key) | uint64(b+1)
}

// delete removes key. Emptying a slot would cut the probe sequence of any
// key stored past it, so the keys after it move back instead (backward-shift
// deletion: no tombstones, so probes never grow longer over time).
func (t *table) delete(key uint64) {
	i := t.find(key)
	if t.slots[i] == 0 {
		return // not there
	}
	for j := (i + 1) & t.mask; t.slots[j] != 0; j = (j + 1) & t.mask {
		// The key at j may move to the hole at i only if its home slot
		// does not lie cyclically in (i, j].
		if home := t.home(t.slots[j]); (j-home)&t.mask >= (j-i)&t.mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
}

package blockhash

import (
	"fmt"
	"math/bits"
)

// table maps keys to blocks: an open-addressing hash table with linear
// probing. Keys are already good hashes, so a key's own bits pick its slot
// directly; a lookup is usually one load and one compare, where a Go map
// would hash the key again and compare it in a bucket.
//
// A slot is one 64-bit word: the key's low 40 bits above the block id plus
// one, so the table costs 8 bytes a slot rather than the 16 of a key and a
// block id side by side (the id's 4 bytes would pad to 8). Two keys equal
// in their low 40 bits are one key to the table. That is harmless for the
// same reason any collision is: a key is only a hint, every hit is verified
// (Cache.holds), and Insert treats a slot held by a block that fails the
// check as a collision.
type table struct {
	// slots has about four slots for every three blocks, so it is at most
	// three-quarters full and probes stay short (Knuth's estimates for
	// linear probing at that load: a hit reads 2.5 slots on average, a miss
	// 8.5, one or two cache lines). A
	// zero slot is empty. Its length need not be a power of two: a key's
	// home slot is its 40 kept bits scaled to the length (a multiply, see
	// home), not its low bits masked.
	slots []uint64
	size  uint64 // len(slots)
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
	size := n + n/3 + 1 // never full, so every probe run ends
	return table{slots: make([]uint64, size), size: uint64(size)}
}

// tag is the part of key a slot keeps: its low 64 − slotBlockBits bits, in
// the slot's high bits.
func tag(key uint64) uint64 { return key << slotBlockBits }

// home returns the slot a key with tag t picks: t as a fraction of 2⁶⁴
// times the table's length (Lemire's multiply-shift range reduction). It
// reads only the tag's bits, so a stored slot's home can be read back from
// the slot.
func (t *table) home(tg uint64) uint64 {
	hi, _ := bits.Mul64(tg&^slotBlockMask, t.size)
	return hi
}

// find returns the slot holding key, or the empty slot ending its probe
// run.
func (t *table) find(key uint64) uint64 {
	k := tag(key)
	i := t.home(k)
	for s := t.slots[i]; s != 0 && s&^slotBlockMask != k; s = t.slots[i] {
		if i++; i == t.size {
			i = 0
		}
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

// lookup stores in found the blocks stored under keys, in order, up to the
// first key not there, and returns how many it found. It is get for a run
// of keys, with no call per key: the walk's probe.
func (t *table) lookup(keys []uint64, found []int32) int {
	slots, size := t.slots, t.size
	for n, key := range keys {
		k := tag(key)
		i, _ := bits.Mul64(k, size)
		s := slots[i]
		for s != 0 && s&^slotBlockMask != k {
			if i++; i == size {
				i = 0
			}
			s = slots[i]
		}
		if s == 0 {
			return n
		}
		found[n] = int32(s&slotBlockMask) - 1
	}
	return len(keys)
}

// put stores b under key, replacing what was there.
func (t *table) put(key uint64, b int32) {
	t.slots[t.find(key)] = tag(key) | uint64(b+1)
}

// dist returns how many slots forward, wrapping around, j lies from i.
func (t *table) dist(i, j uint64) uint64 {
	if j >= i {
		return j - i
	}
	return j + t.size - i
}

// delete removes key. Emptying a slot would cut the probe sequence of any
// key stored past it, so the keys after it move back instead (backward-shift
// deletion: no tombstones, so probes never grow longer over time).
func (t *table) delete(key uint64) {
	i := t.find(key)
	if t.slots[i] == 0 {
		return // not there
	}
	next := func(j uint64) uint64 {
		if j++; j == t.size {
			return 0
		}
		return j
	}
	for j := next(i); t.slots[j] != 0; j = next(j) {
		// The key at j may move to the hole at i only if its home slot
		// does not lie cyclically in (i, j].
		if home := t.home(t.slots[j]); t.dist(home, j) >= t.dist(i, j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
}

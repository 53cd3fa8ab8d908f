package blockhash

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestTableAgainstMap runs random puts, gets and deletes against a Go map.
// Keys share their low bits in a small table, so probe runs are long and
// wrap around the end: the cases backward-shift deletion must get right.
func TestTableAgainstMap(t *testing.T) {
	for _, n := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			tab, ref := newTable(n), map[uint64]int32{}
			keys := make([]uint64, 3*n)
			for i := range keys {
				keys[i] = uint64(rng.IntN(4))<<38 | uint64(i) // 4 home slots at most, one near the end
			}
			for step := range 2000 {
				k := keys[rng.IntN(len(keys))]
				switch {
				case rng.IntN(2) == 0 && len(ref) < n:
					b := int32(rng.IntN(100))
					tab.put(k, b)
					ref[k] = b
				default:
					tab.delete(k)
					delete(ref, k)
				}
				for _, k := range keys {
					have, hok := tab.get(k)
					want, wok := ref[k]
					if have != want || hok != wok {
						t.Fatalf("step %d: get(%#x): have %d, %v; want %d, %v", step, k, have, hok, want, wok)
					}
				}
			}
		})
	}
}

// TestTableKeepsFortyKeyBits pins what a packed slot gives up: keys equal
// in their low 40 bits are one key to the table (the cache verifies every
// hit, so that costs at most a miss), keys that differ there are apart,
// and block ids up to the table's limit survive the packing.
func TestTableKeepsFortyKeyBits(t *testing.T) {
	tab := newTable(8)
	const low = 0x12_3456_789a
	tab.put(low|1<<50, maxTableBlocks-1)
	if b, ok := tab.get(low | 1<<63); !ok || b != maxTableBlocks-1 {
		t.Fatalf("get of a key equal in its low 40 bits: have %d, %v; want %d, true", b, ok, maxTableBlocks-1)
	}
	if _, ok := tab.get(low ^ 1<<39); ok {
		t.Fatal("a key differing in bit 39 found the entry")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("newTable accepted more blocks than a slot can name")
		}
	}()
	newTable(maxTableBlocks + 1)
}

// TestBlockRecordIs40Bytes keeps a block's record at 40 bytes: the queue's
// links share a word with the user count (linkBits) so that adding them
// did not make it 48.
func TestBlockRecordIs40Bytes(t *testing.T) {
	if size := unsafe.Sizeof(blockInfo{}); size != 40 {
		t.Fatalf("blockInfo is %d bytes; want 40", size)
	}
}

package ghost

import (
	"math/rand/v2"
	"testing"
)

// TestTableAgreesWithAMap puts, replaces and deletes random keys, many of
// them in one run of slots (keys that share their low bits), and checks
// every lookup against a Go map: a deletion that left a hole in a run
// would lose the keys probed past it.
func TestTableAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tab, ref := newTable(), map[uint64]int32{}
	keys := make([]uint64, 300)
	for i := range keys {
		keys[i] = rng.Uint64()
		if i%2 == 0 {
			keys[i] &^= 0xff // half the keys crowd into a few runs
		}
	}
	for step := range 20000 {
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(3) {
		case 0, 1:
			n := int32(rng.IntN(1000))
			tab.put(k, n)
			ref[k] = n
		default:
			tab.delete(k)
			delete(ref, k)
		}
		if tab.len() != len(ref) {
			t.Fatalf("step %d: the table holds %d keys, the map %d", step, tab.len(), len(ref))
		}
		for _, k := range keys {
			want, ok := ref[k]
			if !ok {
				want = none
			}
			if got := tab.get(k); got != want {
				t.Fatalf("step %d: key %x: the table has %d, the map %d", step, k, got, want)
			}
		}
	}
}

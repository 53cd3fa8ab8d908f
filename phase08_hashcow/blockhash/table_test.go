package blockhash

import (
	"fmt"
	"math/rand/v2"
	"testing"
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
				keys[i] = uint64(rng.IntN(4)) | uint64(i)<<8 // 4 home slots at most
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

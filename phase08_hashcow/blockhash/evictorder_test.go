package blockhash

import (
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// orderChecked evicts one block at a time (which is what Evict(n) does)
// and checks each victim against a scan of every block: no cached block
// only the index holds may sort before it: a smaller clock in its ord (the
// one settle gave it when it joined the queue, 0 for a block no walk can
// reach), or the same clock and a greater depth.
type orderChecked struct {
	*Cache
	t     *testing.T
	picks *int
}

type lruKey struct {
	b     int32
	used  int64
	depth int32
}

func (o *orderChecked) Evict(n int) int {
	freed := 0
	for freed < n {
		o.settle()
		var idle []lruKey
		for i := range o.blocks {
			if info := &o.blocks[i]; info.serial != 0 && o.alloc.Refs(int32(i)) == 1 {
				idle = append(idle, lruKey{int32(i), info.used(), int32(info.depth())})
			}
		}
		if o.Cache.Evict(1) == 0 {
			if len(idle) > 0 {
				o.t.Fatalf("Evict freed nothing with %d blocks only the index holds", len(idle))
			}
			break
		}
		freed++
		*o.picks++
		var victim *lruKey
		for i := range idle {
			if o.blocks[idle[i].b].serial == 0 {
				victim = &idle[i]
			}
		}
		if victim == nil {
			o.t.Fatal("Evict freed a block the index did not hold alone")
		}
		for _, k := range idle {
			if k.used < victim.used || k.used == victim.used && k.depth > victim.depth {
				o.t.Fatalf("Evict took block %d (used %d, depth %d) before block %d (used %d, depth %d)",
					victim.b, victim.used, victim.depth, k.b, k.used, k.depth)
			}
		}
	}
	return freed
}

// TestEvictOrderMatchesScan drives the cache through random engine-like
// operations (cachetest.Ops, which also audits the queue after each step)
// and checks every victim against a scan of all blocks.
func TestEvictOrderMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2))
	picks := 0
	f := func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return &orderChecked{Cache: New(a, bs), t: t, picks: &picks}
	}
	for range 600 {
		data := make([]byte, 512)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		cachetest.Ops(t, f, data)
	}
	if picks < 100 {
		t.Fatalf("only %d victims were checked", picks)
	}
}

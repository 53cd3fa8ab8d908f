package trie

import (
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// checkedFactory builds tries whose every Evict choice is compared with
// the victim a fresh walk of the whole trie picks (reference_test.go): the
// leaf the kept heap offers must be the one the old code would have taken.
func checkedFactory(t *testing.T, p Policy, picks *int) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		tr := New(a, bs, p)
		tr.pick = func(n *node) {
			*picks++
			q := tr.victims()
			if q.Len() == 0 || q.items[0].n != n {
				t.Fatalf("Evict takes from the leaf ending at depth %d; a walk of the trie puts another first", n.end)
			}
		}
		return tr
	}
}

// TestEvictOrderMatchesWalk drives every policy through random engine-like
// operations (cachetest.Ops, which also audits the Evictable counter and
// the heap after each step) and checks each victim against the walk.
func TestEvictOrderMatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for _, tc := range policies {
		t.Run(tc.name, func(t *testing.T) {
			picks := 0
			for range 300 {
				data := make([]byte, 512)
				for i := range data {
					data[i] = byte(rng.IntN(256))
				}
				cachetest.Ops(t, checkedFactory(t, tc.policy, &picks), data)
			}
			if picks < 100 {
				t.Fatalf("only %d victims were checked", picks)
			}
		})
	}
}

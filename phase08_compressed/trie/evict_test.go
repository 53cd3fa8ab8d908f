package trie

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEvictTakesBlocksFromTheEndOfALeaf(t *testing.T) {
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	pages := commit(t, pool, 1, toks(0, 8)) // one leaf of four blocks
	for _, tc := range []struct {
		evict, freed, left int
	}{
		{1, 1, 3},
		{2, 2, 1},
		{5, 1, 0}, // only one block left to give
		{1, 0, 0},
	} {
		if have := tr.Evict(tc.evict); have != tc.freed {
			t.Fatalf("Evict(%d): have %d freed; want %d", tc.evict, have, tc.freed)
		}
		audit(t, pool, "after Evict")
		if err := checkStructure(tr); err != nil {
			t.Fatal(err)
		}
		want := Shape{}
		if tc.left > 0 {
			want.Children = []Shape{{Tokens: toks(0, 2*tc.left), Blocks: pages[:tc.left]}}
		}
		if diff := cmp.Diff(want, tr.Shape(), equateEmpty); diff != "" {
			t.Fatalf("shape after Evict(%d) (-want +have):\n%s", tc.evict, diff)
		}
	}
}

func TestEvictCascadesToParentsThatBecomeLeaves(t *testing.T) {
	// root → X → {T1, T2}: once both tails go, X is a leaf and goes too,
	// in the same call.
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	run(t, pool, 1, cat(toks(0, 4), toks(100, 2)))
	run(t, pool, 2, cat(toks(0, 4), toks(200, 2)))
	if have := tr.Evictable(); have != 4 {
		t.Fatalf("Evictable: have %d; want 4", have)
	}
	if have := tr.Evict(100); have != 4 {
		t.Fatalf("Evict(100): have %d freed; want 4", have)
	}
	if diff := cmp.Diff(Shape{}, tr.Shape(), equateEmpty); diff != "" {
		t.Fatalf("shape after evicting everything (-want +have):\n%s", diff)
	}
	audit(t, pool, "after evicting everything")
}

func TestEvictSparesWhatLiveSequencesHold(t *testing.T) {
	// Two requests compute prompt P at once; the first commits P, the
	// second commits P and a tail, so the tail (the second's own blocks)
	// hangs below the first's copy of P. While the second is live, its
	// tail is pinned, and so is P, which is not a leaf: nothing may go,
	// although nothing but the trie holds P's blocks.
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	p := toks(0, 4)
	open(t, pool, 1, p)
	open(t, pool, 2, cat(p, toks(100, 2)))
	pool.Commit(1, p)
	pool.Commit(2, cat(p, toks(100, 2)))
	pool.Release(1)
	if have := tr.Evictable(); have != 0 {
		t.Fatalf("Evictable while the tail is live: have %d; want 0", have)
	}
	if have := tr.Evict(100); have != 0 {
		t.Fatalf("Evict while the tail is live: have %d freed; want 0", have)
	}
	pool.Release(2)
	if have := tr.Evict(100); have != 3 {
		t.Fatalf("Evict after the release: have %d freed; want 3", have)
	}
	audit(t, pool, "after evicting everything")
}

func TestPoliciesPickDifferentVictims(t *testing.T) {
	// Y is a base used once, long ago. X is a base two later prompts
	// share, each with a one-block tail. Asked for one block, plain LRU
	// takes Y, the oldest leaf; deepest-first takes the older tail and
	// keeps both bases.
	y, x := toks(500, 2), toks(0, 4)
	t1, t2 := cat(x, toks(100, 2)), cat(x, toks(200, 2))
	tests := []struct {
		name   string
		policy Policy
		want   map[string]int // MatchLen after the eviction
	}{
		{"deepest-first", DeepestFirst, map[string]int{"Y": 2, "X+T1": 4, "X+T2": 6}},
		{"lru", LRU, map[string]int{"Y": 0, "X+T1": 6, "X+T2": 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, tr := newPool(t, 16, 2, tc.policy, nil)
			run(t, pool, 1, y)
			run(t, pool, 2, t1)
			run(t, pool, 3, t2)
			if have := tr.Evict(1); have != 1 {
				t.Fatalf("Evict(1): have %d freed; want 1", have)
			}
			have := map[string]int{"Y": tr.MatchLen(y), "X+T1": tr.MatchLen(t1), "X+T2": tr.MatchLen(t2)}
			if diff := cmp.Diff(tc.want, have); diff != "" {
				t.Fatalf("cached tokens after Evict(1) (-want +have):\n%s", diff)
			}
			audit(t, pool, "after Evict(1)")
		})
	}
}

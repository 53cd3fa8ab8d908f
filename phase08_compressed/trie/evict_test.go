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
			have := map[string]int{"Y": tr.MatchLen("", y), "X+T1": tr.MatchLen("", t1), "X+T2": tr.MatchLen("", t2)}
			if diff := cmp.Diff(tc.want, have); diff != "" {
				t.Fatalf("cached tokens after Evict(1) (-want +have):\n%s", diff)
			}
			audit(t, pool, "after Evict(1)")
		})
	}
}

func TestEvictMergesAChainLeftWithOneChild(t *testing.T) {
	// root → X → {A, B}. Once A is gone, X has one child and nobody holds
	// it: X and B become one node. Its blocks still go in the order two
	// nodes' would, and a later prompt that parts from it after X splits
	// it where X ended.
	x, a, b := toks(0, 8), toks(100, 8), toks(200, 4)
	pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
	pagesA := commit(t, pool, 1, cat(x, a))
	pagesB := commit(t, pool, 2, cat(x, b))
	if have := tr.Evict(2); have != 2 {
		t.Fatalf("Evict(2): have %d freed; want A's 2", have)
	}
	if err := checkStructure(tr); err != nil {
		t.Fatal(err)
	}
	merged := Shape{Children: []Shape{{Tokens: cat(x, b), Blocks: cat(pagesA[:2], pagesB[2:])}}}
	if diff := cmp.Diff(merged, tr.Shape(), equateEmpty); diff != "" {
		t.Fatalf("shape once A is gone (-want +have):\n%s", diff)
	}

	t.Run("a sequence reading only X pins X's part", func(t *testing.T) {
		pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
		commit(t, pool, 1, cat(x, a))
		commit(t, pool, 2, cat(x, b))
		tr.Evict(2)
		open(t, pool, 3, x) // lent X's two blocks, inside the merged node
		if have := tr.Evictable(); have != 1 {
			t.Fatalf("Evictable with X lent: have %d; want B's 1", have)
		}
		if have := tr.Evict(5); have != 1 {
			t.Fatalf("Evict(5) with X lent: have %d; want B's 1", have)
		}
		if have := pool.MatchLen("", x); have != 8 {
			t.Fatalf("MatchLen(X): have %d; want 8", have)
		}
		pool.Release(3)
		audit(t, pool, "after release")
		if have := tr.Evictable(); have != 2 {
			t.Fatalf("Evictable with X idle: have %d; want 2", have)
		}
	})

	t.Run("a prompt parting after X splits it there", func(t *testing.T) {
		c := toks(300, 4)
		pagesC := commit(t, pool, 3, cat(x, c))
		if err := checkStructure(tr); err != nil {
			t.Fatal(err)
		}
		want := Shape{Children: []Shape{{Tokens: x, Blocks: pagesA[:2], Children: []Shape{
			{Tokens: b, Blocks: pagesB[2:]},
			{Tokens: c, Blocks: pagesC[2:]},
		}}}}
		if diff := cmp.Diff(want, tr.Shape(), equateEmpty); diff != "" {
			t.Fatalf("shape after X+C (-want +have):\n%s", diff)
		}
		for _, n := range tr.root.children {
			if len(n.joins) != 0 {
				t.Fatalf("X after the split: joins %v; want none", n.joins)
			}
		}
	})
}

func TestEvictFreesAMergedLeafSegmentBySegment(t *testing.T) {
	// A leaf W of two blocks, used first, and a merged leaf [X B] (X's two
	// blocks and B's one). Asked for 3 blocks, deepest-first takes B's
	// (depth 3), and then asks again: X, a leaf of depth 2 once B's block
	// is gone, ties with W on depth and is used more recently, so W goes.
	// Trimming on through the join would have taken X's blocks instead.
	x, a, b, w := toks(0, 8), toks(100, 8), toks(200, 4), toks(900, 8)
	pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
	commit(t, pool, 1, w)
	commit(t, pool, 2, cat(x, a))
	commit(t, pool, 3, cat(x, b))
	if have := tr.Evict(2); have != 2 {
		t.Fatalf("Evict(2): have %d; want A's 2", have)
	}
	if have := len(tr.Shape().Children); have != 2 {
		t.Fatalf("top-level nodes after A went: have %d; want 2 (W, and X merged with B)", have)
	}
	if have := tr.Evictable(); have != 5 {
		t.Fatalf("Evictable: have %d; want 5", have)
	}
	if have := tr.Evict(3); have != 3 {
		t.Fatalf("Evict(3): have %d", have)
	}
	if have := pool.MatchLen("", cat(x, b)); have != 8 {
		t.Fatalf("MatchLen(X B): have %d; want 8 (only B's block went)", have)
	}
	if have := pool.MatchLen("", w); have != 0 {
		t.Fatalf("MatchLen(W): have %d; want 0", have)
	}
	audit(t, pool, "after evicting")
}

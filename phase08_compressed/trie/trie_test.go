package trie

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
)

// equateEmpty makes a nil and an empty slice the same in Shape diffs.
var equateEmpty = cmpopts.EquateEmpty()

func TestMatch(t *testing.T) {
	// Block size 2. A is cached with blocks 0, 1, 2; B then shares A's
	// first two blocks, so A's node splits after 4 tokens and B's last
	// block (3) hangs beside A's tail.
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	run(t, pool, 1, []int32{1, 2, 3, 4, 5, 6})
	run(t, pool, 2, []int32{1, 2, 3, 4, 7, 8})

	tests := []struct {
		name    string
		query   []int32
		blocks  []int32
		matched int
	}{
		{"empty", nil, nil, 0},
		{"shorter than a block", []int32{1}, nil, 0},
		{"one block", []int32{1, 2}, []int32{0}, 2},
		{"all of A", []int32{1, 2, 3, 4, 5, 6}, []int32{0, 1, 2}, 6},
		{"A and more", []int32{1, 2, 3, 4, 5, 6, 9, 9}, []int32{0, 1, 2}, 6},
		{"all of B", []int32{1, 2, 3, 4, 7, 8}, []int32{0, 1, 3}, 6},
		{"ends inside a node", []int32{1, 2, 3, 4, 5}, []int32{0, 1}, 4},
		{"diverges inside a block", []int32{1, 2, 3, 99}, []int32{0}, 2},
		{"same first token, other first block", []int32{1, 3}, nil, 0},
		{"unknown", []int32{9, 9}, nil, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if have := tr.MatchLen("", tc.query); have != tc.matched {
				t.Fatalf("MatchLen: have %d; want %d", have, tc.matched)
			}
			seq := 100 + i
			blocks, matched := tr.Match(seq, "", tc.query)
			if matched != tc.matched || !cmp.Equal(blocks, tc.blocks, equateEmpty) {
				t.Fatalf("Match: have (%v, %d); want (%v, %d)", blocks, matched, tc.blocks, tc.matched)
			}
			require.NoError(t, checkStructure(tr))
			tr.Release(seq)
			require.NoError(t, checkStructure(tr))
		})
	}
	audit(t, pool, "after the matches")
}

func TestMatchLendsAReferencePerBlock(t *testing.T) {
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	run(t, pool, 1, toks(0, 6))
	a := pool.Allocator()
	for _, b := range []int32{0, 1, 2} {
		if have := a.Refs(b); have != 1 {
			t.Fatalf("block %d before any match: have %d references; want 1 (the trie's)", b, have)
		}
	}
	tr.Match(7, "", toks(0, 6))
	tr.Match(8, "", toks(0, 4))
	for b, want := range map[int32]int{0: 3, 1: 3, 2: 2} {
		if have := a.Refs(b); have != want {
			t.Fatalf("block %d after two matches: have %d references; want %d", b, have, want)
		}
		if have := tr.Holds(b); have != want {
			t.Fatalf("Holds(%d): have %d; want %d", b, have, want)
		}
	}
	tr.Release(7)
	tr.Release(8)
	audit(t, pool, "after the releases")
	if have := tr.Evictable(); have != 3 {
		t.Fatalf("evictable blocks after the releases: have %d; want 3", have)
	}
}

func TestInsertExtendsAPath(t *testing.T) {
	// A request commits its prompt when prefill completes and commits
	// prompt plus output when it finishes: the second commit hangs the
	// output below the prompt, and the next turn finds both.
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	prompt, output := toks(0, 6), toks(50, 3)
	open(t, pool, 1, prompt)
	pool.Commit(1, prompt)
	require.NoError(t, pool.Grow(1, len(prompt)+len(output)))
	pool.Commit(1, cat(prompt, output)) // 9 tokens: the last one is not a whole block
	pages := append([]int32(nil), pool.Pages(1)...)
	pool.Release(1)

	want := Shape{Children: []Shape{{
		Tokens: prompt, Blocks: pages[:3],
		Children: []Shape{{Tokens: output[:2], Blocks: pages[3:4]}},
	}}}
	if diff := cmp.Diff(want, tr.Shape(), equateEmpty); diff != "" {
		t.Fatalf("shape after both commits (-want +have):\n%s", diff)
	}
	next := cat(prompt, output, toks(90, 4))
	if have := run(t, pool, 2, next); have != 8 {
		t.Fatalf("cached tokens for the next turn: have %d; want 8 (prompt and the whole block of output)", have)
	}
	audit(t, pool, "after the next turn")
}

func TestInsertLeavesCachedTokensAlone(t *testing.T) {
	// Two requests with one prompt run at once: both miss and compute it.
	// The trie keeps the first commit's blocks; the second's stay the
	// pool's and go back to the free list when it is released.
	pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
	prompt := toks(0, 6)
	open(t, pool, 1, prompt)
	open(t, pool, 2, prompt)
	pool.Commit(1, prompt)
	pool.Commit(2, prompt)
	first := append([]int32(nil), pool.Pages(1)...)
	pool.Release(1)
	pool.Release(2)
	audit(t, pool, "after both requests")

	want := Shape{Children: []Shape{{Tokens: prompt, Blocks: first}}}
	if diff := cmp.Diff(want, tr.Shape(), equateEmpty); diff != "" {
		t.Fatalf("shape (-want +have):\n%s", diff)
	}
	if have, want := pool.Allocator().NumFree(), 16-3; have != want {
		t.Fatalf("free blocks: have %d; want %d (the duplicate pages returned)", have, want)
	}
	// Inserting a prefix of a cached run changes nothing: no split.
	run(t, pool, 3, prompt[:2])
	if diff := cmp.Diff(want, tr.Shape(), equateEmpty); diff != "" {
		t.Fatalf("shape after committing a cached prefix (-want +have):\n%s", diff)
	}
}

func TestHitRateIsInTokens(t *testing.T) {
	pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
	run(t, pool, 1, toks(0, 10)) // a miss of 10 tokens
	run(t, pool, 2, toks(0, 10)) // finds 8 of 10
	if have, want := tr.HitRate(), 8.0/20; have != want {
		t.Fatalf("hit rate: have %v; want %v (8 cached of 20 prompt tokens)", have, want)
	}
}

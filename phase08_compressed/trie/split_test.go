package trie

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// TestSplitAtEveryOffset caches A (four blocks) with a child C below it,
// then commits B, which agrees with A on its first d tokens, for every d
// from 0 to len(A). The trie must split A after d rounded down to a
// block: the head keeps that many blocks, a tail takes the rest of A and
// C, and B's own blocks hang beside the tail.
func TestSplitAtEveryOffset(t *testing.T) {
	for _, bs := range []int{1, 2, 4} {
		a, c := toks(100, 4*bs), toks(500, bs)
		for d := 0; d <= len(a); d++ {
			t.Run(fmt.Sprintf("bs=%d/shared=%d", bs, d), func(t *testing.T) {
				b := cat(a[:d], toks(900, 2*bs))
				pool, tr := newPool(t, 64, bs, DeepestFirst, nil)
				pagesA := commit(t, pool, 1, a)
				pagesAC := commit(t, pool, 2, cat(a, c))
				pagesB := commit(t, pool, 3, b)

				k := d / bs * bs        // tokens the head keeps
				end := len(b) / bs * bs // B's partial last block is not cached
				nodeC := Shape{Tokens: c, Blocks: pagesAC[len(a)/bs:]}
				nodeB := Shape{Tokens: b[k:end], Blocks: pagesB[k/bs : end/bs]}
				var want Shape
				switch k {
				case 0: // nothing shared: B is A's sibling
					want = Shape{Children: sorted(Shape{Tokens: a, Blocks: pagesA, Children: []Shape{nodeC}}, nodeB)}
				case len(a): // all of A shared: B is C's sibling
					want = Shape{Children: []Shape{{Tokens: a, Blocks: pagesA, Children: sorted(nodeC, nodeB)}}}
				default:
					tail := Shape{Tokens: a[k:], Blocks: pagesA[k/bs:], Children: []Shape{nodeC}}
					want = Shape{Children: []Shape{{Tokens: a[:k], Blocks: pagesA[:k/bs], Children: sorted(tail, nodeB)}}}
				}
				if diff := cmp.Diff(want, tr.Shape(), equateEmpty); diff != "" {
					t.Fatalf("shape after committing B (-want +have):\n%s", diff)
				}
				require.NoError(t, checkStructure(tr))
				for _, q := range [][]int32{a, cat(a, c), b} {
					if have, want := tr.MatchLen("", q), len(q)/bs*bs; have != want {
						t.Fatalf("MatchLen(%v): have %d; want %d", q, have, want)
					}
				}
				// Evicting everything walks up through the moved parent
				// links and must free every block.
				tr.Evict(tr.Evictable())
				audit(t, pool, "after evicting everything")
				if have := pool.Allocator().NumFree(); have != 64 {
					t.Fatalf("free blocks after evicting everything: have %d; want 64", have)
				}
			})
		}
	}
}

// sorted orders sibling shapes the way Shape does.
func sorted(s ...Shape) []Shape {
	slices.SortFunc(s, func(a, b Shape) int { return slices.Compare(a.Tokens, b.Tokens) })
	return s
}

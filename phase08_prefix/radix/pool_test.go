package radix

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoolIntegration follows the tree through the pool calls the engine
// makes: Open (match), Grow, Commit (insert), Release.
func TestPoolIntegration(t *testing.T) {
	t.Run("AllocationReusesCachedBlocks", func(t *testing.T) {
		p, _ := newPool(t, 16, 4)
		first := serve(t, p, 1, seq(0, 10))
		if cached := start(t, p, 2, join(seq(0, 8), seq(70, 5))); cached != 8 {
			t.Fatalf("cached: have %d; want 8", cached)
		}
		pages := p.Pages(2)
		if fmt.Sprint(pages[:2]) != fmt.Sprint(first[:2]) || len(pages) != 4 {
			t.Fatalf("pages: have %v; want %v followed by 2 fresh pages", pages, first[:2])
		}
		if free := p.Allocator().NumFree(); free != 16-4 {
			t.Fatalf("free blocks: have %d; want 12 (2 cached, 2 fresh)", free)
		}
	})

	t.Run("ReleaseKeepsTreeBlocksAndFreesTheRest", func(t *testing.T) {
		p, tree := newPool(t, 16, 4)
		start(t, p, 1, seq(0, 10))
		p.Commit(1, seq(0, 10))
		pages := append([]int32(nil), p.Pages(1)...)
		p.Release(1)
		requireClean(t, p)
		for i, page := range pages {
			want := map[bool]int{true: 1, false: 0}[i < 2]
			if refs := p.Allocator().Refs(page); refs != want || tree.Holds(page) != want {
				t.Fatalf("page %d after release: have refs %d, holds %d; want %d", i, refs, tree.Holds(page), want)
			}
		}
	})

	t.Run("FreeTokensCountEvictableBlocks", func(t *testing.T) {
		p, tree := newPool(t, 8, 4)
		serve(t, p, 1, seq(0, 16))
		require.Equal(t, 4, p.Allocator().NumFree())
		require.Equal(t, 4, tree.Evictable())
		if have := p.FreeTokens(); have != 32 {
			t.Fatalf("free tokens: have %d; want 32 (4 free blocks + 4 evictable)", have)
		}
	})

	t.Run("GrowEvictsUnderPressure", func(t *testing.T) {
		p, tree := newPool(t, 8, 4)
		serve(t, p, 1, seq(0, 16))
		if cached := start(t, p, 2, seq(500, 32)); cached != 0 {
			t.Fatalf("cached: have %d; want 0", cached)
		}
		if tree.Stats().Evicted != 4 || tree.Cached() != 0 {
			t.Fatalf("have %d evicted, %d cached; want 4, 0", tree.Stats().Evicted, tree.Cached())
		}
	})

	t.Run("GrowFailsWhenCachedBlocksAreInUse", func(t *testing.T) {
		p, tree := newPool(t, 8, 4)
		serve(t, p, 1, seq(0, 16))
		start(t, p, 2, seq(0, 16)) // pins all four cached blocks
		_, err := p.Open(3, "", seq(500, 20))
		require.NoError(t, err)
		require.Error(t, p.Grow(3, 20), "5 blocks with 4 free and none evictable")
		p.Release(3)
		require.Equal(t, 0, tree.Stats().Evicted)
		requireClean(t, p)
	})

	t.Run("AuditCountsTreeHolds", func(t *testing.T) {
		p, tree := newPool(t, 16, 4)
		for i := range 5 {
			serve(t, p, i, join(seq(0, 8), seq(100*i, 5)))
		}
		if tree.Cached() != 2+5 {
			t.Fatalf("cached: have %d; want 7 (2 shared + 1 per suffix)", tree.Cached())
		}
		tree.Evict(tree.Evictable())
		requireClean(t, p)
		require.Equal(t, 16, p.Allocator().NumFree())
	})
}

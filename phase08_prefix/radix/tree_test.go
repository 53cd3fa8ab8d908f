package radix

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	a, b, c, d := seq(100, 16), seq(200, 16), seq(300, 16), seq(400, 16)
	x, y := seq(900, 16), seq(1000, 16)
	long := seq(5000, 1060)
	tests := []struct {
		name   string
		bs     int
		served []int32 // the prompt a finished sequence left in the tree, if any
		query  []int32
		want   int // tokens matched
	}{
		{"empty tree", 16, nil, join(a, b), 0},
		{"insert then match", 16, join(a, b, c, d), join(a, b, c, d, x), 64},
		{"partial match", 16, join(a, b, c, d), join(a, b, x, y), 32},
		{"full match of a block-aligned prompt", 16, join(a, b, c, d), join(a, b, c, d), 64},
		{"1060 tokens match 66 blocks", 16, long, long, 1056},
		{"divergence inside a block rounds down", 4, seq(0, 12), join(seq(0, 6), seq(50, 6)), 4},
		{"short prompt", 16, a[:10], a[:10], 0},
		{"block size 1", 1, seq(0, 5), join(seq(0, 3), seq(7, 2)), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, tree := newPool(t, 128, tt.bs)
			var pages []int32
			if tt.served != nil {
				pages = serve(t, p, 1, tt.served)
			}
			if have := tree.MatchLen("", tt.query); have != tt.want {
				t.Fatalf("MatchLen: have %d; want %d", have, tt.want)
			}
			blocks, matched := tree.Match(2, "", tt.query)
			if matched != tt.want {
				t.Fatalf("Match: have %d tokens; want %d", matched, tt.want)
			}
			want := pages[:tt.want/tt.bs]
			if fmt.Sprint(blocks) != fmt.Sprint(want) {
				t.Fatalf("Match: have blocks %v; want %v, the served sequence's first pages", blocks, want)
			}
			tree.Release(2)
		})
	}
}

func TestShortPromptCachesNothing(t *testing.T) {
	p, tree := newPool(t, 8, 16)
	serve(t, p, 1, seq(0, 15))
	if tree.Cached() != 0 {
		t.Fatalf("cached blocks after a 15-token prompt at block size 16: have %d; want 0", tree.Cached())
	}
	if n := p.Allocator().NumFree(); n != 8 {
		t.Fatalf("free blocks: have %d; want 8", n)
	}
}

func TestRefcountLifecycle(t *testing.T) {
	p, tree := newPool(t, 16, 4)
	prompt := seq(0, 12)
	serve(t, p, 1, prompt)
	users := func() []int {
		var out []int
		for n := tree.find("", prompt); n != tree.root; n = tree.nodes[n].parent {
			out = append([]int{int(tree.nodes[n].users)}, out...)
		}
		return out
	}
	steps := []struct {
		do        func()
		what      string
		users     []int
		evictable int
	}{
		{func() {}, "after the first sequence finished", []int{0, 0, 0}, 3},
		{func() { start(t, p, 2, prompt) }, "after one match", []int{1, 1, 1}, 0},
		{func() { start(t, p, 3, prompt[:8]) }, "after a shorter second match", []int{2, 2, 1}, 0},
		{func() { require.Zero(t, tree.Evict(3)) }, "after evicting with every node in use", []int{2, 2, 1}, 0},
		{func() { p.Release(2) }, "after the first release", []int{1, 1, 0}, 1},
		{func() { p.Release(3) }, "after the second release", []int{0, 0, 0}, 3},
	}
	for _, s := range steps {
		s.do()
		requireClean(t, p)
		if have := users(); fmt.Sprint(have) != fmt.Sprint(s.users) {
			t.Fatalf("%s: have users %v; want %v", s.what, have, s.users)
		}
		if have := tree.Evictable(); have != s.evictable {
			t.Fatalf("%s: have %d evictable; want %d", s.what, have, s.evictable)
		}
	}
}

func TestEvictLeastRecentlyUsedFirst(t *testing.T) {
	p, tree := newPool(t, 16, 4)
	x, y := seq(0, 8), seq(100, 8)
	serve(t, p, 1, x)
	serve(t, p, 2, y)
	serve(t, p, 3, x) // x is now the most recently used
	if n := tree.Evict(1); n != 1 {
		t.Fatalf("evicted: have %d; want 1", n)
	}
	if have := tree.MatchLen("", y); have != 4 {
		t.Fatalf("MatchLen(y) after evicting one block: have %d; want 4 (y's leaf was the oldest)", have)
	}
	if have := tree.MatchLen("", x); have != 8 {
		t.Fatalf("MatchLen(x) after evicting one block: have %d; want 8", have)
	}
	requireClean(t, p)
}

func TestEvictCascadesToParents(t *testing.T) {
	p, tree := newPool(t, 8, 4)
	pages := serve(t, p, 1, seq(0, 8)) // blocks A, B: B's parent is A
	if n := tree.Evict(1); n != 1 || tree.Contains(pages[1]) || !tree.Contains(pages[0]) {
		t.Fatalf("Evict(1): freed %d, contains A %v, B %v; want 1, true, false (the leaf goes first)",
			n, tree.Contains(pages[0]), tree.Contains(pages[1]))
	}
	serve(t, p, 2, seq(0, 8))
	if n := tree.Evict(2); n != 2 {
		t.Fatalf("Evict(2) of a two-block chain: have %d; want 2 (A becomes a leaf once B is gone)", n)
	}
	if tree.Cached() != 0 || p.Allocator().NumFree() != 8 {
		t.Fatalf("after the cascade: have %d cached, %d free; want 0, 8", tree.Cached(), p.Allocator().NumFree())
	}
	requireClean(t, p)
}

func TestContainsAndCached(t *testing.T) {
	p, tree := newPool(t, 16, 4)
	pages := serve(t, p, 1, seq(0, 10)) // two whole blocks and a partial one
	steps := []struct {
		what     string
		cached   int
		contains []bool // per page of the served sequence
	}{
		{"after serving 10 tokens", 2, []bool{true, true, false}},
		{"after evicting one block", 1, []bool{true, false, false}},
		{"after evicting another", 0, []bool{false, false, false}},
	}
	for i, s := range steps {
		if i > 0 {
			tree.Evict(1)
		}
		if tree.Cached() != s.cached || tree.Stats().Blocks != s.cached {
			t.Fatalf("%s: have Cached %d, Stats().Blocks %d; want %d", s.what, tree.Cached(), tree.Stats().Blocks, s.cached)
		}
		for j, want := range s.contains {
			if have := tree.Contains(pages[j]); have != want {
				t.Fatalf("%s: Contains(page %d): have %v; want %v", s.what, j, have, want)
			}
		}
	}
	if tree.Stats().Evicted != 2 {
		t.Fatalf("Stats().Evicted: have %d; want 2", tree.Stats().Evicted)
	}
}

// Two sequences prefill the same prefix at once; the second to commit finds
// its first blocks cached already. It keeps its own copies of those; the
// tree caches its later blocks with references of its own, without users.
func TestInsertAfterAnotherSequenceCachedTheSameBlocks(t *testing.T) {
	p, tree := newPool(t, 32, 4)
	shared := seq(0, 8)
	a, b := join(shared, seq(100, 4)), join(shared, seq(200, 8))
	start(t, p, 1, a)
	start(t, p, 2, b)
	p.Commit(1, a)
	p.Commit(2, b)
	requireClean(t, p)
	late := p.Pages(2)[2:4]
	for _, page := range late {
		if !tree.Contains(page) || p.Allocator().Refs(page) != 2 {
			t.Fatalf("page %d: contains %v, refs %d; want true, 2 (the sequence's and the tree's)", page, tree.Contains(page), p.Allocator().Refs(page))
		}
	}
	if have := tree.MatchLen("", b); have != 16 {
		t.Fatalf("MatchLen(b): have %d; want 16", have)
	}
	if have := tree.Evictable(); have != 2 {
		t.Fatalf("evictable while both sequences are live: have %d; want 2 (b's late blocks)", have)
	}
	p.Release(1)
	p.Release(2)
	requireClean(t, p)
	if have := tree.MatchLen("", b); have != 16 {
		t.Fatalf("MatchLen(b) after both ended: have %d; want 16", have)
	}
	if freed := tree.Evict(100); freed != 5 || p.Allocator().NumFree() != 32 {
		t.Fatalf("drain: freed %d, %d free; want 5, 32", freed, p.Allocator().NumFree())
	}
}

// Evicting a node whose block its sequence still owns frees nothing; Evict
// goes on until it has freed what was asked.
func TestEvictCountsOnlyFreedBlocks(t *testing.T) {
	p, tree := newPool(t, 8, 4)
	shared := seq(0, 8)
	a, b := join(shared, seq(100, 4)), join(shared, seq(200, 4))
	start(t, p, 1, a)
	start(t, p, 2, b)
	p.Commit(1, a)
	p.Commit(2, b) // b's last block is cached, but b still owns it
	p.Release(1)   // a's three blocks: no users left
	if have := tree.Evictable(); have != 4 {
		t.Fatalf("evictable: have %d; want 4", have)
	}
	freed := tree.Evict(3)
	t.Logf("Evict(3) with 4 evictable nodes, one of whose blocks a live sequence owns: %d blocks freed, %d nodes left, %d of 8 blocks free", freed, tree.Cached(), p.Allocator().NumFree())
	if freed != 3 {
		t.Fatalf("Evict(3): have %d freed; want 3", freed)
	}
	if tree.Cached() != 0 || p.Allocator().NumFree() != 8-3 {
		t.Fatalf("have %d cached, %d free; want 0, 5: b's block evicted from the tree without being freed", tree.Cached(), p.Allocator().NumFree())
	}
	requireClean(t, p)
}

func TestMisuseIsLoud(t *testing.T) {
	tests := []struct {
		name string
		do   func(p *Tree)
	}{
		{"match twice without release", func(tree *Tree) {
			tree.Match(7, "", seq(0, 8))
			tree.Match(7, "", seq(0, 8))
		}},
		{"insert claiming more lent pages than the tree lent", func(tree *Tree) {
			tree.Insert(7, "", seq(0, 8), []int32{0, 1}, 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, tree := newPool(t, 16, 4)
			serve(t, p, 1, seq(0, 8))
			require.Panics(t, func() { tt.do(tree) })
		})
	}
}

func TestReleaseOfUnknownSequenceIsANoOp(t *testing.T) {
	p, tree := newPool(t, 16, 4)
	serve(t, p, 1, seq(0, 8))
	tree.Release(42)
	if tree.Evictable() != 2 {
		t.Fatalf("evictable: have %d; want 2", tree.Evictable())
	}
	requireClean(t, p)
}

// A node keeps its first child itself and the others in the edge table,
// which starts with 8 slots and doubles as it fills. 100 prompts that differ
// in their first block make the root's children fill it many times over;
// every prompt must still be found after each growth and after evictions
// shift entries back.
func TestEdgeTableGrowsWithItsEdges(t *testing.T) {
	p, tree := newPool(t, 256, 4)
	prompt := func(i int) []int32 { return join(seq(1000*i, 4), seq(1000*i+500, 4)) }
	for i := range 100 {
		serve(t, p, i, prompt(i))
		require.NoError(t, tree.AuditCache())
	}
	require.Equal(t, 99, tree.inTable, "edges in the table: every first block but the root's first child")
	require.GreaterOrEqual(t, len(tree.edges), 2*tree.inTable, "the table stays at most half full")
	for i := range 100 {
		require.Equal(t, 8, tree.MatchLen("", prompt(i)), "prompt %d", i)
	}
	require.Equal(t, 100, tree.Evict(100)) // the 50 oldest prompts, leaf first
	require.NoError(t, tree.AuditCache())
	for i := range 100 {
		want := map[bool]int{true: 0, false: 8}[i < 50]
		require.Equal(t, want, tree.MatchLen("", prompt(i)), "prompt %d after evicting the 50 oldest", i)
	}
	requireClean(t, p)
}

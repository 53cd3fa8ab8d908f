package main

import (
	"fmt"
	"strings"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/kernels/cpu"
	"kvlab/phase08_compressed/trie"
)

// matchByScanning is the match as first written, ported over a Shape: at
// each node, compare the query with the node itself, then with every child
// to pick the one sharing most, then recurse into that child, where the
// first step compares it with the query once more. That is 2 + siblings
// comparisons per descent where one map lookup and one comparison do.
// compares counts them.
func matchByScanning(s trie.Shape, query []int32, bs int, compares *int) int {
	*compares++
	n := commonPrefix(s.Tokens, query)
	if n < len(s.Tokens) {
		return n / bs * bs
	}
	rest := query[n:]
	best, bestLen := -1, 0
	for i, c := range s.Children {
		*compares++
		if k := commonPrefix(c.Tokens, rest); k > bestLen {
			best, bestLen = i, k
		}
	}
	if best < 0 || bestLen < bs {
		return n
	}
	return n + matchByScanning(s.Children[best], rest, bs, compares)
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// wideTrie caches width bases of 64 tokens, each with width tails of 64
// tokens (block size 16), and returns the trie and the queries: every base
// with every tail.
func wideTrie(tb testing.TB, width int) (*trie.Trie, [][]int32) {
	var tr *trie.Trie
	pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: 8*width*width + 8, BlockSize: 16,
		NewCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
			tr = trie.New(a, bs, trie.DeepestFirst)
			return tr
		}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	var queries [][]int32
	for i := range width {
		for j := range width {
			q := cachetest.Join(cachetest.Tokens(100_000*(i+1), 64), cachetest.Tokens(1000*(j+1), 64))
			id := i*width + j
			if _, err := pool.Open(id, "", q); err != nil {
				tb.Fatal(err)
			}
			if err := pool.Grow(id, len(q)); err != nil {
				tb.Fatal(err)
			}
			pool.Commit(id, q)
			pool.Release(id)
			queries = append(queries, q)
		}
	}
	return tr, queries
}

func TestPitfallThreeComparesPerDescent(t *testing.T) {
	// Both matches agree; the scanning one compares once per sibling at
	// every level, so its work grows with the width of the trie. The
	// trie descends with one lookup and one comparison per level: two
	// here, whatever the width (Trie.Comparisons counts them).
	var scans, lookups []string
	for _, width := range []int{2, 8, 16} {
		t.Run(fmt.Sprintf("width=%d", width), func(t *testing.T) {
			tr, queries := wideTrie(t, width)
			shape := tr.Shape()
			for _, q := range queries {
				compares := 0
				if have, want := matchByScanning(shape, q, 16, &compares), tr.MatchLen("", q); have != want || want != 128 {
					t.Fatalf("match of a cached 128-token query: scanning %d, trie %d; want 128", have, want)
				}
				if want := 1 + 2*(width+1); compares != want {
					t.Fatalf("comparisons: have %d; want %d (the root, then at each of 2 levels every sibling and the chosen child again)", compares, want)
				}
				// The production trie, counted: one comparison per level,
				// whatever the width.
				before := tr.Comparisons()
				tr.MatchLen("", q)
				if have := tr.Comparisons() - before; have != 2 {
					t.Fatalf("the trie's comparisons for a 2-level match: have %d; want 2", have)
				}
			}
			compares := 0
			matchByScanning(shape, queries[0], 16, &compares)
			before := tr.Comparisons()
			tr.MatchLen("", queries[0])
			scans = append(scans, fmt.Sprintf("%d at width %d", compares, width))
			lookups = append(lookups, fmt.Sprint(tr.Comparisons()-before))
		})
	}
	t.Logf("with the bug (comparing every sibling on the way down): %s prefix comparisons per 128-token match; fixed (one map lookup and one comparison per level): %s",
		strings.Join(scans, ", "), strings.Join(lookups, ", "))
}

package trie

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// newPool returns a pool of blocks blocks of bs tokens whose prefix cache
// is a fresh trie, or what wrap makes of it when wrap is not nil, and the
// trie. The
// allocator hands out blocks 0, 1, 2, ... in order, so tests can name them.
func newPool(t testing.TB, blocks, bs int, p Policy, wrap func(*Trie) kvcache.PrefixCache) (*kvcache.Pool, *Trie) {
	t.Helper()
	var tr *Trie
	pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{
		Layers: 1, KVDim: 1, Blocks: blocks, BlockSize: bs,
		NewCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
			tr = New(a, bs, p)
			if wrap != nil {
				return wrap(tr)
			}
			return tr
		},
	})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, tr
}

// open starts sequence id the way the engine admits a request: match, then
// grow the page table to hold tokens. It returns the cached token count.
func open(t testing.TB, pool *kvcache.Pool, id int, tokens []int32) int {
	t.Helper()
	cached, err := pool.Open(id, "", tokens)
	require.NoError(t, err)
	require.NoError(t, pool.Grow(id, len(tokens)))
	return cached
}

// run opens, commits and releases sequence id, as a request that finishes
// with these tokens would, and returns the cached token count.
func run(t testing.TB, pool *kvcache.Pool, id int, tokens []int32) int {
	t.Helper()
	cached := open(t, pool, id, tokens)
	pool.Commit(id, tokens)
	pool.Release(id)
	return cached
}

// commit runs tokens through the pool as sequence id, as run does, and
// returns the pages the sequence had (the lent ones first).
func commit(t testing.TB, pool *kvcache.Pool, id int, tokens []int32) []int32 {
	t.Helper()
	open(t, pool, id, tokens)
	pages := slices.Clone(pool.Pages(id))
	pool.Commit(id, tokens)
	pool.Release(id)
	return pages
}

// audit fails the test if block ownership is broken.
func audit(t testing.TB, pool *kvcache.Pool, when string) {
	t.Helper()
	require.NoError(t, pool.Audit().Err(), when)
}

// toks returns n tokens base, base+1, ...
func toks(base, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(base + i)
	}
	return out
}

// cat concatenates token runs into a new slice.
func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// checkStructure returns the first broken structural invariant of tr, or
// nil: every child's parent link points at the node whose map holds it,
// under the key of its first block; every node but the root holds a
// positive whole number of blocks, one per block of tokens; no block is
// listed twice; and the trie's own accounts (holds, blocks) match what the
// nodes and lent lists say.
func checkStructure(tr *Trie) error {
	listed := make(map[int32]bool)
	var walk func(n *node) error
	walk = func(n *node) error {
		for key, c := range n.children {
			switch {
			case c.parent != n:
				return fmt.Errorf("node %v: parent link does not point at the node whose children hold it", c.tokens)
			case len(c.tokens) == 0 || len(c.tokens)%tr.bs != 0 || len(c.tokens) != len(c.blocks)*tr.bs:
				return fmt.Errorf("node %v: %d tokens for %d blocks of %d", c.tokens, len(c.tokens), len(c.blocks), tr.bs)
			case key != keyOf(c.tokens[:tr.bs]):
				return fmt.Errorf("node %v: filed under a key that is not its first block's", c.tokens)
			}
			for i, j := range c.joins {
				if j <= 0 || j >= len(c.blocks) || (i > 0 && j <= c.joins[i-1]) {
					return fmt.Errorf("node %v: joins %v for %d blocks; want ascending, inside the node", c.tokens, c.joins, len(c.blocks))
				}
			}
			for _, b := range c.blocks {
				if listed[b] {
					return fmt.Errorf("block %d listed by two nodes", b)
				}
				listed[b] = true
			}
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(tr.root); err != nil {
		return err
	}
	if len(listed) != tr.blocks {
		return fmt.Errorf("trie counts %d blocks; nodes list %d", tr.blocks, len(listed))
	}
	lentTo := make(map[int32]int)
	for _, blocks := range tr.lent {
		for _, b := range blocks {
			lentTo[b]++
		}
	}
	for b := range tr.holds {
		want := lentTo[int32(b)]
		if listed[int32(b)] {
			want++
		}
		if int(tr.holds[b]) != want {
			return fmt.Errorf("block %d: holds %d; want %d (listed %v, lent %d times)", b, tr.holds[b], want, listed[int32(b)], lentTo[int32(b)])
		}
	}
	return nil
}

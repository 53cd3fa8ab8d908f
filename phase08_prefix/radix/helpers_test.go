package radix

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// newPool returns a pool of blocks×bs slots whose prefix cache is a Tree,
// and that tree. The tests drive the tree through the pool, as the engine
// does, so that every page is lent or owned exactly as in a real run.
func newPool(t *testing.T, blocks, bs int) (*kvcache.Pool, *Tree) {
	t.Helper()
	return newPoolWith(t, blocks, bs, func(t *Tree) kvcache.PrefixCache { return t })
}

// newPoolWith is newPool with the tree wrapped by wrap before the pool gets
// it: the pitfall tests inject bugs that way.
func newPoolWith(t *testing.T, blocks, bs int, wrap func(*Tree) kvcache.PrefixCache) (*kvcache.Pool, *Tree) {
	t.Helper()
	var tree *Tree
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: blocks, BlockSize: bs,
		NewCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
			tree = NewTree(a, bs)
			return wrap(tree)
		}})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p, tree
}

// start opens seq for prompt, gives it pages for every token and returns
// how many tokens it found cached.
func start(t *testing.T, p *kvcache.Pool, seq int, prompt []int32) int {
	t.Helper()
	cached, err := p.Open(seq, "", prompt)
	require.NoError(t, err)
	require.NoError(t, p.Grow(seq, len(prompt)))
	requireClean(t, p)
	return cached
}

// serve runs seq through its whole life: start, commit, release. It returns
// the pages seq had, so tests can tell which blocks the tree kept.
func serve(t *testing.T, p *kvcache.Pool, seq int, prompt []int32) []int32 {
	t.Helper()
	start(t, p, seq, prompt)
	p.Commit(seq, prompt)
	pages := append([]int32(nil), p.Pages(seq)...)
	p.Release(seq)
	requireClean(t, p)
	return pages
}

func requireClean(t *testing.T, p *kvcache.Pool) {
	t.Helper()
	require.NoError(t, p.Audit().Err())
}

// seq returns n tokens base, base+1, ...: distinct bases give distinct runs.
func seq(base, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(base + i)
	}
	return out
}

func join(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

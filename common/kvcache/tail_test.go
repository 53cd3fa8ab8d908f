package kvcache_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// newTailPool is a pool of blocks blocks of 4 tokens on design build,
// keeping up to 4 tails.
func newTailPool(t *testing.T, blocks int, build func(*kvcache.Allocator, int) kvcache.PrefixCache) *kvcache.Pool {
	t.Helper()
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 2, Blocks: blocks, BlockSize: 4, NewCache: build, TailBlocks: 4})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// runSeq opens id on prompt, grows it, makes its pages writable, commits
// every prompt token and releases it, checking the audit after each step.
// It returns what Open found cached.
func runSeq(t *testing.T, p *kvcache.Pool, id int, prompt []int32) int {
	t.Helper()
	cached, err := p.Open(id, "", prompt)
	require.NoError(t, err)
	require.NoError(t, p.Grow(id, len(prompt)))
	from := min(cached, len(prompt)-1)
	require.NoError(t, p.PrepareWrite(id, from, len(prompt)-from))
	p.Commit(id, prompt)
	require.NoError(t, p.Audit().Err())
	p.Release(id)
	require.NoError(t, p.Audit().Err())
	return cached
}

var six = []int32{1, 2, 3, 4, 5, 6} // a whole block and two tokens

// TestTailKeptAndHit: the two tokens after the whole block come back as
// cached, and the next prompt that shares only one of them gets one.
func TestTailKeptAndHit(t *testing.T) {
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			p := newTailPool(t, 4, d.new)
			require.Equal(t, 0, runSeq(t, p, 1, six))
			require.Equal(t, 1, p.TailStats().Held)
			require.Equal(t, 6, p.MatchLen("", six))
			require.Equal(t, 6, runSeq(t, p, 2, six))
			require.Equal(t, 5, runSeq(t, p, 3, []int32{1, 2, 3, 4, 5, 9, 9}))
			require.Zero(t, p.MatchLen("other", six), "nothing is shared across salts")
			require.Equal(t, kvcache.TailStats{Kept: 3, Held: 1, Hits: 2, Tokens: 3}, p.TailStats())
		})
	}
}

// TestTailGivesUpItsBlock: in a pool of two blocks, a hit on a kept tail
// leaves no block to copy it into before the write. The tail gives its
// block up to the sequence instead of failing it: a prompt that fits the
// pool without tails fits it with them.
func TestTailGivesUpItsBlock(t *testing.T) {
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			p := newTailPool(t, 2, d.new)
			runSeq(t, p, 1, six)
			require.Equal(t, 6, runSeq(t, p, 2, six))
			require.Equal(t, 1, p.TailStats().Held, "the second run's tail is kept in turn")
		})
	}
}

// TestTailNeverEvicts: when a sequence ends sharing its last block with a
// forked one, keeping a tail needs a copy, and with no free block none is
// kept; the fork's own end keeps it.
func TestTailNeverEvicts(t *testing.T) {
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			p := newTailPool(t, 2, d.new)
			_, err := p.Open(1, "", six)
			require.NoError(t, err)
			require.NoError(t, p.Grow(1, 6))
			p.Commit(1, six)
			require.NoError(t, p.Fork(1, 2))
			p.Release(1)
			require.NoError(t, p.Audit().Err())
			require.Equal(t, 0, p.TailStats().Held, "no free block to copy the shared one into")
			p.Release(2)
			require.NoError(t, p.Audit().Err())
			require.Equal(t, 1, p.TailStats().Held)
		})
	}
}

// TestTailBoundAndPressure: the store keeps at most TailBlocks tails, and
// a sequence that needs room gets the kept blocks back before any cached
// block is evicted.
func TestTailBoundAndPressure(t *testing.T) {
	p := newTailPool(t, 12, radix.PrefixCache)
	for i := range int32(6) {
		runSeq(t, p, int(i), []int32{100 + i, 1, 2, 3, 4})
	}
	require.Equal(t, 4, p.TailStats().Held)
	// 6 cached blocks and 4 kept ones (the 2 oldest tails are gone) leave
	// 2 of 12 free. Asking for 4 takes those and the 2 least recent tails.
	cachedBefore := p.Cache().Stats().Blocks
	_, err := p.Open(50, "", nil)
	require.NoError(t, err)
	require.NoError(t, p.Grow(50, 16))
	require.Equal(t, 2, p.TailStats().Held)
	require.Equal(t, cachedBefore, p.Cache().Stats().Blocks, "no cached block evicted while tails were left")
	require.Equal(t, 5, p.MatchLen("", []int32{105, 1, 2, 3, 4}), "the most recent tails stay")
	require.Equal(t, 4, p.MatchLen("", []int32{103, 1, 2, 3, 4}))
	require.NoError(t, p.Audit().Err())
}

// TestTailBlocksConfig: a negative count, or tails without a prefix cache.
func TestTailBlocksConfig(t *testing.T) {
	_, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 2, Blocks: 4, BlockSize: 4, TailBlocks: 2})
	require.ErrorContains(t, err, "no prefix cache")
	_, err = kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 2, Blocks: 4, BlockSize: 4, NewCache: radix.PrefixCache, TailBlocks: -1})
	require.ErrorContains(t, err, "must not be negative")
}

// TestTailSharedIsNotFree: while an open sequence shares a kept block,
// giving the tail back would free nothing, so FreeTokens does not count it.
func TestTailSharedIsNotFree(t *testing.T) {
	p := newTailPool(t, 4, radix.PrefixCache)
	runSeq(t, p, 1, six)
	require.Equal(t, 4*4, p.FreeTokens(), "2 free, the cached block and the tail")
	_, err := p.Open(2, "", six)
	require.NoError(t, err)
	require.Equal(t, 2*4, p.FreeTokens(), "the cached block is lent and the tail shared")
	require.NoError(t, p.Audit().Err())
}

// TestTailHitIsRecent: a hit makes its tail the most recently used, so a
// tail kept past the bound while the hit's sequence runs pushes out
// another.
func TestTailHitIsRecent(t *testing.T) {
	p := newTailPool(t, 16, radix.PrefixCache)
	prompt := func(i int32) []int32 { return []int32{100 + i, 1, 2, 3, 4} }
	for i := range int32(4) {
		runSeq(t, p, int(i), prompt(i))
	}
	cached, err := p.Open(10, "", prompt(0))
	require.NoError(t, err)
	require.Equal(t, 5, cached, "a hit on the oldest")
	runSeq(t, p, 11, prompt(4))
	require.Equal(t, 5, p.MatchLen("", prompt(0)))
	require.Equal(t, 4, p.MatchLen("", prompt(1)), "the least recently used went")
	require.NoError(t, p.Audit().Err())
}

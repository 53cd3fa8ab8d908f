package trie

import (
	"errors"
	"kvlab/common/kvcache/cachetest"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// The pitfalls of the mini-vLLM tutorial's tree, shown on its port
// (tutorial_port_test.go) and, for each, the library doing it right.

func TestPitfallHardCodedBlockSizeInSplit(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Block size 4. A (12 tokens, blocks 0 1 2) is cached; B shares its
	// first 6 tokens. A block-aligned split can only cut after 4.
	a := toks(0, 12)
	b := cat(a[:6], toks(50, 6))
	tests := []struct {
		name       string
		hard16     bool
		headBlocks []int32 // blocks the 6-token head gets
		tailBlocks []int32 // blocks the 6-token tail keeps
	}{
		{"rounds up", false, []int32{0, 1}, []int32{2}},
		{"assumes 16", true, []int32{0}, []int32{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTutorialTree()
			tr.hardCoded16 = tc.hard16
			tr.insert(a, []int32{0, 1, 2}, 4)
			tr.insert(b, []int32{0, 1, 9}, 4)
			head := tr.root.children[0]
			tail := head.children[6]
			sy.Bug(tc.name, "B shares 6 tokens at block size 4: the head gets blocks %v, the tail keeps %v", head.blocks, tail.blocks)
			require.Equal(t, tc.headBlocks, head.blocks, "blocks of the head (tokens 0..5)")
			require.Equal(t, tc.tailBlocks, tail.blocks, "blocks of the tail (tokens 6..11)")
			// Neither matches the KV layout: tokens 6 and 7 sit in block 1,
			// which is the head's block in one case and the tail's first in
			// the other; tokens 4 and 5 have no block at all in the second.
		})
	}
	t.Run("trie", func(t *testing.T) {
		pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
		pagesA := commit(t, pool, 1, a)
		pagesB := commit(t, pool, 2, b)
		head := tr.Shape().Children[0]
		sy.Add("trie, block-aligned split", "the head is %d tokens with blocks %v (of A's %v), its children %d and %d tokens", len(head.Tokens), head.Blocks, pagesA, len(head.Children[0].Tokens), len(head.Children[len(head.Children)-1].Tokens))
		require.Equal(t, a[:4], head.Tokens)
		require.Equal(t, pagesA[:1], head.Blocks)
		require.Equal(t, []Shape{{Tokens: a[4:], Blocks: pagesA[1:]}, {Tokens: b[4:], Blocks: pagesB[1:]}}, head.Children)
	})
}

func TestPitfallMatchNotBlockAligned(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Block size 4. The first prompt, 1..5, is cached as one 5-token
	// edge; the second, 1..8, matches that edge whole.
	first, second := toks(1, 5), toks(1, 8)
	t.Run("edge length", func(t *testing.T) {
		pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: 8, BlockSize: 4,
			NewCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return newTutorialCache(a, bs) }})
		require.NoError(t, err)
		defer pool.Close()
		run(t, pool, 1, first)
		cached := open(t, pool, 2, second)
		require.Equal(t, 5, cached, "cached tokens: not a multiple of 4")
		// Position 5 is in block 1, which the tree lent: computing it would
		// write into a block the cache shares. The pool refuses.
		err = pool.PrepareWrite(2, 5, 3)
		sy.Add("edge length", "%d tokens matched at block size 4; writing position 5: %v", cached, err)
		require.ErrorContains(t, err, "lent by the prefix cache")
	})
	t.Run("trie", func(t *testing.T) {
		pool, _ := newPool(t, 8, 4, DeepestFirst, nil)
		run(t, pool, 1, first)
		cached := open(t, pool, 2, second)
		err := pool.PrepareWrite(2, 4, 4)
		sy.Add("trie", "%d tokens matched; writing positions 4..7: %v", cached, err)
		require.Equal(t, 4, cached)
		require.NoError(t, err)
	})
	t.Run("trie, a prompt that diverges inside a block", func(t *testing.T) {
		// 1..8 is cached as two blocks; the query agrees on 5 tokens and
		// then diverges inside the second block: only the first is found.
		pool, _ := newPool(t, 8, 4, DeepestFirst, nil)
		run(t, pool, 1, second)
		require.Equal(t, 4, open(t, pool, 2, cat(toks(1, 5), toks(90, 3))))
		require.NoError(t, pool.PrepareWrite(2, 4, 4), "the diverging block is the sequence's own")
	})
}

func TestPitfallRefCountClampedAtZero(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// A is live and ends at node N (blocks 0 1); B extends A with a block
	// of its own and finishes. Removing B walks up and decrements N too,
	// though B never counted itself there: N drops to 0 and is freed under
	// A. When A finishes, N's count would go to -1.
	a, b := toks(0, 8), cat(toks(0, 8), toks(50, 4))
	t.Run("clamped", func(t *testing.T) {
		tr := newTutorialTree()
		na := tr.insert(a, []int32{0, 1}, 4)
		nb := tr.insert(b, []int32{0, 1, 2}, 4)
		byB := tr.remove(nb)
		byA := tr.remove(na)
		sy.Add("clamped", "B's removal frees blocks %v under live A, and A's frees %v again, with no error", byB, byA)
		require.Equal(t, []int32{2, 0, 1}, byB, "B's removal frees A's blocks")
		require.Equal(t, []int32{0, 1}, byA, "A's removal frees them again; the clamp hid the underflow")
	})
	t.Run("asserted", func(t *testing.T) {
		tr := newTutorialTree()
		tr.assertRefs = true
		na := tr.insert(a, []int32{0, 1}, 4)
		tr.remove(tr.insert(b, []int32{0, 1, 2}, 4))
		func() {
			defer func() { sy.Add("asserted", "A's removal panics: %v", recover()) }()
			tr.remove(na)
		}()
		tr = newTutorialTree()
		tr.assertRefs = true
		na = tr.insert(a, []int32{0, 1}, 4)
		tr.remove(tr.insert(b, []int32{0, 1, 2}, 4))
		require.PanicsWithValue(t, "tutorial tree: reference count below zero", func() { tr.remove(na) })
	})
	t.Run("trie", func(t *testing.T) {
		// The trie keeps no per-node counts: each sequence's references
		// are recorded block by block and dropped exactly once.
		pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
		open(t, pool, 1, a)
		pool.Commit(1, a)
		run(t, pool, 2, b)
		freed := tr.Evict(100)
		sy.Add("trie", "evicting everything idle after B frees %d block; A's first block keeps %d references", freed, pool.Allocator().Refs(pool.Pages(1)[0]))
		require.Equal(t, 1, freed, "only B's own block can go")
		require.Equal(t, 2, pool.Allocator().Refs(pool.Pages(1)[0]), "A's blocks: A and the trie")
		audit(t, pool, "after B")
		require.PanicsWithValue(t, "trie: dropping a reference on block 9 that the trie never took", func() { tr.drop([]int32{9}) })
	})
}

func TestPitfallEvictionDoesNotCascade(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// A chain root → P (blocks 0 1) → Q (block 2), nobody using either.
	p, q := toks(0, 8), cat(toks(0, 8), toks(50, 4))
	t.Run("one pass", func(t *testing.T) {
		tr := newTutorialTree()
		np := tr.insert(p, []int32{0, 1}, 4)
		nq := tr.insert(q, []int32{0, 1, 2}, 4)
		np.ref, nq.ref = 0, 0 // as the tutorial's own eviction test does
		freed := tr.evictLRU(3)
		sy.Add("one pass", "asked for 3 blocks of an idle chain, freed %v", freed)
		require.Equal(t, []int32{2}, freed, "asked for 3, freed Q's 1")
		require.Empty(t, np.children, "P is a leaf now, and was not considered")
	})
	t.Run("trie", func(t *testing.T) {
		pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
		run(t, pool, 1, p)
		run(t, pool, 2, q)
		freed := tr.Evict(3)
		sy.Add("trie", "asked for 3, freed %d", freed)
		require.Equal(t, 3, freed)
	})
}

func TestPitfallEvictionLoopNeverStops(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Every block is held by a live sequence; another needs one more.
	t.Run("evict until it fits", func(t *testing.T) {
		a := kvcache.NewAllocator(4)
		_, err := a.Allocate(nil, 4)
		require.NoError(t, err)
		rounds, ok := tutorialExtend(a, newTutorialTree(), 1, 1000)
		sy.Add("evict until it fits", "with every block held, the loop ran %d rounds (the test's cap) and found room: %v", rounds, ok)
		require.False(t, ok, "the loop found nothing to evict and kept going")
		require.Equal(t, 1000, rounds)
	})
	t.Run("pool", func(t *testing.T) {
		// Grow asks the trie once; what it cannot free is an error the
		// scheduler handles (it preempts or waits).
		pool, _ := newPool(t, 4, 4, DeepestFirst, nil)
		open(t, pool, 1, toks(0, 16))
		_, err := pool.Open(2, "", toks(100, 4))
		require.NoError(t, err)
		var oob *kvcache.OutOfBlocksError
		grow := pool.Grow(2, 4)
		sy.Add("pool", "Grow asks the trie once and returns: %v", grow)
		require.True(t, errors.As(grow, &oob))
	})
}

func TestPitfallMergeTakesChildRefCount(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// X = 1..8 (blocks 0 1) is live. Y and Z share X's first block, so X's
	// node splits into a head (block 0) and N (block 1). When Y and Z are
	// gone the head has one child left, N, and merges with it, taking N's
	// count (X's 1) for both: the next decrement on the way up frees the
	// merged node, block 1 included, while X still reads it.
	x := toks(1, 8)
	y := cat(toks(1, 4), toks(9, 4))
	z := cat(toks(1, 4), toks(13, 4))
	for _, merge := range []bool{true, false} {
		name := map[bool]string{true: "merged", false: "not merged"}[merge]
		t.Run(name, func(t *testing.T) {
			tr := newTutorialTree()
			tr.merge = merge
			tr.insert(x, []int32{0, 1}, 4)
			ny := tr.insert(y, []int32{0, 2}, 4)
			nz := tr.insert(z, []int32{0, 3}, 4)
			freed := append(tr.remove(nz), tr.remove(ny)...)
			sy.Add(name, "removing Y and Z frees blocks %v; block 1, which live X reads, among them: %v", freed, contains(freed, 1))
			require.Equal(t, merge, contains(freed, 1), "block 1, which live X reads, freed: %v", freed)
		})
	}
	t.Run("trie", func(t *testing.T) {
		// The trie merges the head with N when Y and Z are gone, and
		// counts live on blocks: the merge changes no allocator count.
		pool, tr := newPool(t, 16, 4, DeepestFirst, nil)
		open(t, pool, 1, x)
		pool.Commit(1, x)
		run(t, pool, 2, y)
		run(t, pool, 3, z)
		tr.Evict(100)
		sy.Add("trie", "after Y and Z are evicted, X's blocks %v hold %d and %d references", pool.Pages(1), pool.Allocator().Refs(pool.Pages(1)[0]), pool.Allocator().Refs(pool.Pages(1)[1]))
		require.Equal(t, []Shape{{Tokens: x, Blocks: pool.Pages(1)}}, tr.Shape().Children, "head and N merged")
		for _, b := range pool.Pages(1) {
			require.Equal(t, 2, pool.Allocator().Refs(b), "block %d of live X", b)
		}
		audit(t, pool, "after evicting what can go")
	})
	t.Run("trie keeps the parent's count", func(t *testing.T) {
		// The trie's nodes count the sequences that used them, for the
		// Priority policy. P is used by four requests, its children A and
		// B by one each. Evicting A leaves P with one child, B, and merges
		// them. The merged leaf must describe P (4 uses, last at clock 8),
		// not B (1 use, at clock 6): with B's count, Priority would rank a
		// prefix four requests shared below W, a one-off used once since.
		p := toks(0, 8)
		seen := &recorder{Policy: Priority}
		pool, tr := newPool(t, 16, 4, seen, nil)
		run(t, pool, 1, p)                    // clock 1, 2: P created
		run(t, pool, 2, cat(p, toks(100, 4))) // clock 3, 4: P matched, A created
		run(t, pool, 3, cat(p, toks(200, 4))) // clock 5, 6: P matched, B created
		run(t, pool, 4, p)                    // clock 7, 8: P matched
		require.Equal(t, 1, tr.Evict(1), "A: weight 4 × 1")
		merged := cat(p, toks(200, 4))
		require.Equal(t, []Shape{{Tokens: merged, Blocks: []int32{0, 1, 3}}}, tr.Shape().Children, "P and B merged")
		w := toks(500, 4)
		run(t, pool, 5, w) // clock 9, 10: W created, weight 10 × 1
		seen.leaves = nil
		require.Equal(t, 1, tr.Evict(1))
		require.Contains(t, seen.leaves, Leaf{Depth: 3, Level: 1, LastUse: 8, Refs: 4}, "the merged leaf as the policy saw it")
		require.Equal(t, 12, pool.MatchLen("", merged), "P and B kept")
		require.Equal(t, 0, pool.MatchLen("", w), "W went first")
		audit(t, pool, "after evicting W")
	})
}

// recorder is a Policy that records every leaf it is asked about.
type recorder struct {
	Policy
	leaves []Leaf
}

func (r *recorder) Before(a, b Leaf) bool {
	r.leaves = append(r.leaves, a, b)
	return r.Policy.Before(a, b)
}

func contains(s []int32, x int32) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func TestPitfallHitRateNotARate(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// One 1024-token prompt cached, then asked for twice: every token of
	// both queries was found.
	prompt := toks(0, 1024)
	t.Run("per query × 100", func(t *testing.T) {
		tr := newTutorialTree()
		tr.insert(prompt, toks(0, 64), 16)
		tr.match(prompt)
		tr.match(prompt)
		sy.Add("per query × 100", "two full hits on a 1024-token prompt read %v", tr.hitRate())
		require.Equal(t, 10.24, tr.hitRate(), "2048 tokens / (2 queries × 100)")
	})
	t.Run("tokens", func(t *testing.T) {
		pool, tr := newPool(t, 80, 16, DeepestFirst, nil)
		run(t, pool, 1, prompt) // a miss: 0 of 1024
		run(t, pool, 2, prompt)
		run(t, pool, 3, prompt)
		sy.Add("tokens", "a miss then two full hits read %.4f (cached tokens / prompt tokens)", tr.HitRate())
		require.Equal(t, 2048.0/3072, tr.HitRate(), "cached tokens / prompt tokens")
	})
}

package radix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// checkedTree is the Tree with every Match and MatchLen run twice: once by
// the plain walks the docs read (find, descend) and once by the fast lanes
// that Match and MatchLen run (findFast, descendFast). It fails the test
// unless the two reach the same node and blocks and, for Match, leave every
// node (users, recent child, ring links) and the ring's length alike. What
// it returns is the shipped Match's, so a suite run through it tests both.
type checkedTree struct {
	*Tree
	t testing.TB
}

// checkedTrees builds checkedTree caches; weak gives them an edge hash
// under which nearly every key collides, so lookups go through findEdge's
// compare.
func checkedTrees(t testing.TB, weak bool) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		tr := NewTree(a, bs)
		tr.weakHash = weak
		return checkedTree{tr, t}
	}
}

func (c checkedTree) MatchLen(salt string, tokens []int32) int {
	c.t.Helper()
	if plain, fast := c.find(salt, tokens), c.findFast(salt, tokens); plain != fast {
		c.t.Fatalf("MatchLen(%q, %d tokens): find reaches node %d, findFast %d", salt, len(tokens), plain, fast)
	}
	return c.Tree.MatchLen(salt, tokens)
}

func (c checkedTree) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	c.t.Helper()
	t := c.Tree
	before := treeStateOf(t)
	end, plain := none, []int32(nil)
	if n := t.rootOf(salt, false); n != none {
		end, plain = t.descend(n, tokens, nil)
	}
	want := treeStateOf(t)
	before.restore(t)
	blocks, matched := t.Match(seq, salt, tokens)
	if !slices.Equal(blocks, plain) || matched != len(plain)*t.blockSize {
		c.t.Fatalf("Match(%d, %q, %d tokens): descend takes blocks %v, descendFast %v (%d tokens)", seq, salt, len(tokens), plain, blocks, matched)
	}
	if held, ok := t.held[seq]; len(blocks) > 0 && (!ok || held != end) {
		c.t.Fatalf("Match(%d, %q, %d tokens): descend ends at node %d, Match records %d", seq, salt, len(tokens), end, held)
	}
	if diff := want.diff(treeStateOf(t)); diff != "" {
		c.t.Fatalf("Match(%d, %q, %d tokens) of blocks %v: descend and descendFast leave the tree apart: %s", seq, salt, len(tokens), blocks, diff)
	}
	return blocks, matched
}

// treeState is what a walk that takes its nodes may change: the nodes
// (users, recent children, ring links) and the ring's length.
type treeState struct {
	nodes []node
	idle  int
}

func treeStateOf(t *Tree) treeState { return treeState{slices.Clone(t.nodes), t.idle} }

func (s treeState) restore(t *Tree) {
	copy(t.nodes, s.nodes)
	t.idle = s.idle
}

// diff describes the first difference between s and o, or is "".
func (s treeState) diff(o treeState) string {
	for n := range s.nodes {
		if s.nodes[n] != o.nodes[n] {
			return fmt.Sprintf("node %d is %+v after descend, %+v after descendFast", n, s.nodes[n], o.nodes[n])
		}
	}
	if s.idle != o.idle {
		return fmt.Sprintf("the ring holds %d nodes after descend, %d after descendFast", s.idle, o.idle)
	}
	return ""
}

// TestFastLanesAgreeWithTheWalk runs hand-picked trees through
// checkedTree: a chain the fast lane follows whole, a branch where the
// recent child is the wrong one (the lane stops and the walk's lookup
// goes on), a node with many children in the edge table, a prompt ending
// inside a block, salts. Each query's match length is the one the case
// expects, and the walks and the fast lanes agree on it and on what Match
// leaves behind.
func TestFastLanesAgreeWithTheWalk(t *testing.T) {
	base := cachetest.Tokens(0, 64)
	with := func(tail ...int32) []int32 { return cachetest.Join(base, tail) }
	for _, c := range []struct {
		name   string
		bs     int
		weak   bool
		cached [][]int32 // committed in order; the last one is each node's recent child
		salts  []string
		query  []int32
		salt   string
		want   int
	}{
		{"a chain, all cached", 4, false, [][]int32{base}, nil, base, "", 64},
		{"a chain, cut inside a block", 4, false, [][]int32{base}, nil, base[:30], "", 28},
		{"a chain, a token changed", 4, false, [][]int32{base}, nil, cachetest.Join(base[:41], []int32{999}, base[42:]), "", 40},
		{"a branch, the recent child", 4, false,
			[][]int32{with(1, 1, 1, 1, 5, 5, 5, 5), with(2, 2, 2, 2, 6, 6, 6, 6)}, nil, with(2, 2, 2, 2, 6, 6, 6, 6), "", 72},
		{"a branch, the first child", 4, false,
			[][]int32{with(1, 1, 1, 1, 5, 5, 5, 5), with(2, 2, 2, 2, 6, 6, 6, 6)}, nil, with(1, 1, 1, 1, 5, 5, 5, 5), "", 72},
		{"a branch, a child from the table", 4, false,
			[][]int32{with(1, 1, 1, 1), with(2, 2, 2, 2), with(3, 3, 3, 3, 7, 7, 7, 7), with(4, 4, 4, 4)}, nil, with(3, 3, 3, 3, 7, 7, 7, 7, 8), "", 72},
		{"a branch, a child from a colliding table", 4, true,
			[][]int32{with(1, 1, 1, 1), with(2, 2, 2, 2), with(3, 3, 3, 3, 7, 7, 7, 7), with(4, 4, 4, 4)}, nil, with(3, 3, 3, 3, 7, 7, 7, 7), "", 72},
		{"a branch, no child", 4, false,
			[][]int32{with(1, 1, 1, 1), with(2, 2, 2, 2)}, nil, with(3, 3, 3, 3), "", 64},
		{"17-token blocks", 17, false, [][]int32{base[:51], cachetest.Join(base[:34], []int32{9})}, nil, base[:60], "", 51},
		{"one-token blocks", 1, false, [][]int32{base, base[:10]}, nil, cachetest.Join(base[:20], []int32{0}), "", 20},
		{"the same salt", 4, false, [][]int32{base}, []string{"a"}, base, "a", 64},
		{"another salt", 4, false, [][]int32{base}, []string{"a"}, base, "b", 0},
		{"no salt", 4, false, [][]int32{base}, []string{"a"}, base, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := cachetest.NewHarness(t, checkedTrees(t, c.weak), 64, c.bs)
			h.RequireFinds(c.cached, c.salts, c.salt, c.query, c.want)
		})
	}
}

// TestLabelsFastAgreesWithLabels compares the two token compares at every
// block size from 1 to 40: equal blocks, and a block with one token
// changed, at every position, in its lowest bit and its highest.
func TestLabelsFastAgreesWithLabels(t *testing.T) {
	for bs := 1; bs <= 40; bs++ {
		tr := NewTree(kvcache.NewAllocator(2), bs)
		stored := cachetest.Tokens(7*bs, bs)
		copy(tr.tokensOf(1), stored)
		check := func(block []int32) {
			t.Helper()
			if plain, fast := tr.labels(1, block), tr.labelsFast(1, block); plain != fast {
				t.Fatalf("block size %d, block %v against %v: labels says %v, labelsFast %v", bs, block, stored, plain, fast)
			}
		}
		check(stored)
		check(append(slices.Clone(stored), 1, 2, 3)) // only the first bs tokens count
		for i := range bs {
			for _, flip := range []int32{1, -1 << 31} {
				block := slices.Clone(stored)
				block[i] ^= flip
				check(block)
			}
		}
	}
}

// TestPlainWalksPassTheConformanceSuite runs the shared suite through
// checkedTree, so that find and descend meet every case the fast lanes do.
func TestPlainWalksPassTheConformanceSuite(t *testing.T) {
	t.Run("edge hash", func(t *testing.T) { cachetest.Run(t, checkedTrees(t, false)) })
	t.Run("colliding edge hash", func(t *testing.T) { cachetest.Run(t, checkedTrees(t, true)) })
}

// FuzzFastLanes checks the fast lanes against the plain walks on random
// inputs: the operations of cachetest.Ops (admissions, prefill chunks and
// commits, decode, finishes, evictions and forks over a three-token
// alphabet), and longer prompts in blocks of up to 17 tokens, with the
// edge hash or a colliding one; and labelsFast against labels on a block
// drawn from the input.
// `go test -run '^$' -fuzz FuzzFastLanes ./phase08_prefix/radix/` explores.
func FuzzFastLanes(f *testing.F) {
	for _, seed := range cachetest.OpsSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cachetest.Ops(t, checkedTrees(t, false), data)
		cachetest.Ops(t, checkedTrees(t, true), data)
		longTreePrompts(t, data)
	})
}

// longTreePrompts commits prompts of up to 40 blocks drawn from data, each
// perhaps the start of an earlier one with a token changed and more
// tokens after it, asks for each under a random salt, evicts now and then,
// and compares labels and labelsFast on the first prompt's blocks.
func longTreePrompts(t *testing.T, data []byte) {
	var seed [32]byte
	copy(seed[:], data)
	rng := rand.New(rand.NewChaCha8(seed))
	bs := []int{1, 2, 4, 16, 17}[rng.IntN(5)]
	h := cachetest.NewHarness(t, checkedTrees(t, rng.IntN(2) == 0), 4*40+8, bs)
	prompts := h.ServeRandomPrompts(rng, 8, func(r *rand.Rand) bool { return r.IntN(3) > 0 })
	tr := h.Cache.(checkedTree).Tree
	for b := range tr.alloc.Total() {
		if !tr.Contains(int32(b)) || len(prompts) == 0 {
			continue
		}
		for end := bs; end <= len(prompts[0]); end += bs {
			block := prompts[0][end-bs : end]
			if plain, fast := tr.labels(int32(b), block), tr.labelsFast(int32(b), block); plain != fast {
				t.Fatalf("block %d %v against %v: labels says %v, labelsFast %v", b, tr.tokensOf(int32(b)), block, plain, fast)
			}
		}
	}
}

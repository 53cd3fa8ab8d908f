package main

import (
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
)

// sharedBases is the workload where eviction policies part ways: a few
// shared system prompts ("bases"), requests taking turns among them, each
// with a tail of its own that no later request reuses, and a pool too small
// to keep every tail. It returns each request's prompt.
func sharedBases(requests int) [][]int32 {
	const bases, baseLen = 4, 32
	rng := rand.New(rand.NewPCG(1, 2))
	prompts := make([][]int32, requests)
	for i := range prompts {
		base := cachetest.Tokens(10_000*(i%bases), baseLen)
		tail := cachetest.Tokens(1_000_000+1000*i, 8+rng.IntN(17))
		prompts[i] = cachetest.Join(base, tail)
	}
	return prompts
}

// replay runs prompts one after another through a 40-block pool (block
// size 4) with the trie and policy p, and returns the tokens each found
// cached and the hit rate: cached tokens / prompt tokens.
func replay(tb testing.TB, prompts [][]int32, p trie.Policy) (cached []int, hitRate float64) {
	h := cachetest.NewHarness(tb, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return trie.New(a, bs, p)
	}, 40, 4)
	found, total := 0, 0
	for i, prompt := range prompts {
		n := h.Start(i, prompt)
		if n < 0 {
			tb.Fatalf("request %d does not fit", i)
		}
		h.Finish(i)
		cached = append(cached, n)
		found += n
		total += len(prompt)
	}
	return cached, float64(found) / float64(total)
}

func TestDeepestFirstKeepsSharedBases(t *testing.T) {
	// Every base is 32 tokens, whole blocks. A base becomes a node of its
	// own once a second prompt shares it; from the third round on,
	// deepest-first evicts only the one-off tails, and every request finds
	// its whole base. Plain LRU evicts a base whenever it is the oldest
	// leaf, and loses hits.
	prompts := sharedBases(200)
	cached, deepest := replay(t, prompts, trie.DeepestFirst)
	for i, n := range cached[8:] {
		if n != 32 {
			t.Fatalf("deepest-first, request %d: cached %d tokens; want 32", 8+i, n)
		}
	}
	_, lru := replay(t, prompts, trie.LRU)
	if lru >= deepest {
		t.Fatalf("hit rate: have lru %.3f, deepest-first %.3f; want lru below deepest-first", lru, deepest)
	}
	t.Logf("hit rate: deepest-first %.3f, lru %.3f", deepest, lru)
}

// nodeLevels is DeepestFirst with depth counted in nodes instead of blocks.
type nodeLevels struct{}

func (nodeLevels) Before(a, b trie.Leaf) bool {
	if a.Level != b.Level {
		return a.Level > b.Level
	}
	return a.LastUse < b.LastUse
}

func TestPitfallLevelsCountedInNodes(t *testing.T) {
	// Until a second prompt shares it, a base and the first prompt's tail
	// are one node, at the same level as every tail: counted in nodes,
	// "deepest first" eats into that base as readily as into a tail, and
	// the bases of the first rounds keep losing their ends. Counted in
	// blocks, the tail ends are always deeper than the bases.
	prompts := sharedBases(200)
	cached, byNodes := replay(t, prompts, nodeLevels{})
	short := 0
	for _, n := range cached[8:] {
		if n < 32 {
			short++
		}
	}
	if short == 0 {
		t.Fatalf("levels in nodes: every request after the warm-up found its whole base; want some short")
	}
	_, byBlocks := replay(t, prompts, trie.DeepestFirst)
	if byNodes >= byBlocks {
		t.Fatalf("hit rate: have %.3f with levels in nodes, %.3f in blocks; want nodes below blocks", byNodes, byBlocks)
	}
	t.Logf("hit rate: levels in nodes %.3f (%d of %d requests short of their base), in blocks %.3f", byNodes, short, len(cached)-8, byBlocks)
}

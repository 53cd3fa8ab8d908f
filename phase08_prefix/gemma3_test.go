package main

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/model/modeltest"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// TestGemma3CacheMatchesBaseline is the sliding-window lesson: a cached
// prefix's KV is exactly right for a new request on a model whose local
// layers see only modeltest.GemmaWindow positions, because the KV of
// position p depends only on tokens 0..p, window or not. Every layer keeps
// every block (nothing is freed when it slides out of a window), so a
// matched prefix is complete for local and global layers alike, and each of
// the three designs must reproduce the uncached engine bit for bit, with
// shared prefixes (37 and 16 tokens) and whole prompts longer than the
// window.
func TestGemma3CacheMatchesBaseline(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(8))
	reqs := sharedPrefixRequests(rand.New(rand.NewPCG(3, 4)), 12)
	longest := 0
	for _, r := range reqs {
		longest = max(longest, len(r.Prompt))
	}
	if longest <= 2*modeltest.GemmaWindow {
		t.Fatalf("the longest prompt has %d tokens; the test needs prompts well past the window of %d", longest, modeltest.GemmaWindow)
	}
	designs := []struct {
		name  string
		cache func(*kvcache.Allocator, int) kvcache.PrefixCache
	}{
		{"radix", radix.New},
		{"hashcow", blockhash.PrefixCache},
		{"compressed", trie.PrefixCache},
	}
	for _, bs := range []int{1, 4, 16} {
		c := config()
		c.BlockSize = bs
		c.NumBlocks = 1024 / bs
		want := run(t, m, baseline(c), reqs...)
		for _, d := range designs {
			c.PrefixCache = d.cache
			t.Run(fmt.Sprintf("%s/bs=%d/all at once", d.name, bs), func(t *testing.T) {
				requireSame(t, run(t, m, c, reqs...), want)
			})
			t.Run(fmt.Sprintf("%s/bs=%d/one after another", d.name, bs), func(t *testing.T) {
				e := newEngine(t, m, c)
				hits := 0
				for _, r := range reqs {
					res := serve(t, e, 10_000, r)[r.ID]
					requireSame(t, map[int]*result{r.ID: res}, map[int]*result{r.ID: want[r.ID]})
					if res.cached > modeltest.GemmaWindow {
						hits++ // a reused prefix longer than the window
					}
				}
				if hits == 0 {
					t.Fatalf("no request reused more than %d cached tokens; the test must cross the window", modeltest.GemmaWindow)
				}
			})
		}
	}
}

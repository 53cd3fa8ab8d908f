package cachetest

import (
	"testing"

	"kvlab/common/kvcache"
)

// naive is the simplest correct prefix cache: a map from every cached
// block-aligned prefix, named together with its salt (saltKey), to the
// block holding its last block's KV. It holds
// one allocator reference per entry and one per user, evicts only entries
// no descendant depends on, and exists to prove the suite passable.
type naive struct {
	a       *kvcache.Allocator
	bs      int
	entries map[string]*naiveEntry
	users   map[int][]int32 // blocks each sequence took in Match
	holds   map[int32]int   // allocator references the cache accounts for
	clock   int64
	evicted int
}

type naiveEntry struct {
	block    int32
	parent   string
	children int
	lastUse  int64
}

func newNaive(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
	return &naive{a: a, bs: bs, entries: map[string]*naiveEntry{}, users: map[int][]int32{}, holds: map[int32]int{}}
}

func (c *naive) match(salt string, tokens []int32) (blocks []int32, keys []string) {
	for end := c.bs; end <= len(tokens); end += c.bs {
		e, ok := c.entries[saltKey(salt, tokens[:end])]
		if !ok {
			break
		}
		blocks = append(blocks, e.block)
		keys = append(keys, saltKey(salt, tokens[:end]))
	}
	return blocks, keys
}

func (c *naive) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	blocks, keys := c.match(salt, tokens)
	c.clock++
	for i, b := range blocks {
		c.incref(b)
		c.entries[keys[i]].lastUse = c.clock
	}
	c.users[seq] = blocks
	return blocks, len(blocks) * c.bs
}

func (c *naive) MatchLen(salt string, tokens []int32) int {
	blocks, _ := c.match(salt, tokens)
	return len(blocks) * c.bs
}

func (c *naive) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	c.clock++
	parent := ""
	for i := 0; (i+1)*c.bs <= len(tokens); i++ {
		k := saltKey(salt, tokens[:(i+1)*c.bs])
		if e, ok := c.entries[k]; ok {
			e.lastUse = c.clock
		} else {
			c.incref(pages[i])
			c.entries[k] = &naiveEntry{block: pages[i], parent: parent, lastUse: c.clock}
			if parent != "" {
				c.entries[parent].children++
			}
		}
		parent = k
	}
	return lent
}

func (c *naive) Release(seq int) {
	for _, b := range c.users[seq] {
		c.decref(b)
	}
	delete(c.users, seq)
}

func (c *naive) Evict(n int) int {
	freed := 0
	for freed < n {
		var victim string
		var best *naiveEntry
		for k, e := range c.entries {
			if e.children == 0 && c.a.Refs(e.block) == 1 && (best == nil || e.lastUse < best.lastUse) {
				victim, best = k, e
			}
		}
		if best == nil {
			break
		}
		delete(c.entries, victim)
		if best.parent != "" {
			c.entries[best.parent].children--
		}
		c.decref(best.block)
		c.evicted++
		freed++
	}
	return freed
}

func (c *naive) Evictable() int {
	pinned := map[string]bool{}
	for k, e := range c.entries {
		if c.a.Refs(e.block) > 1 {
			for p := k; p != "" && !pinned[p]; p = c.entries[p].parent {
				pinned[p] = true
			}
		}
	}
	return len(c.entries) - len(pinned)
}

func (c *naive) Holds(b int32) int { return c.holds[b] }

// incref and decref move an allocator reference and its account together.
func (c *naive) incref(b int32) { c.a.Incref(b); c.holds[b]++ }
func (c *naive) decref(b int32) { c.a.Decref(b); c.holds[b]-- }

func (c *naive) Stats() kvcache.CacheStats {
	return kvcache.CacheStats{Blocks: len(c.entries), Evicted: c.evicted}
}

func TestSuiteAgainstNaiveCache(t *testing.T) { Run(t, newNaive) }

func BenchmarkNaive(b *testing.B) { Benchmarks(b, newNaive) }

package kvcache

import "fmt"

// Per-tenant cache shares. Salts keep tenants from reading each other's
// cached prefixes, but not from evicting them: with one LRU order for the
// whole pool, a tenant that floods unique prompts pushes every other
// tenant's prefixes out. ShareCapped bounds that: under eviction pressure a
// salt holding more than share of the cache's blocks loses its own least
// recently used blocks before anyone else loses one.
//
// The design is the smallest one that works for every PrefixCache without
// touching it: one instance of the design per salt, all over the same
// allocator. A salt's cached-block count is then its instance's
// Stats().Blocks, and "evict from this salt" is its instance's Evict, which
// already frees only blocks no live sequence holds, in the design's own
// LRU order. Isolation comes for free too: an instance only ever sees one
// salt. What is given up is one LRU order across tenants: below their
// shares, the tenant holding the most blocks is evicted first.

// ShareCapped returns a factory for newCache's design with at most share
// (0 < share ≤ 1) of the cached blocks per salt under eviction pressure.
// The cap is soft: it binds only when the pool must evict, so a pool with
// room to spare lets a single tenant fill it.
func ShareCapped(newCache func(a *Allocator, blockSize int) PrefixCache, share float64) func(a *Allocator, blockSize int) PrefixCache {
	if share <= 0 || share > 1 {
		panic(fmt.Sprintf("kvcache: tenant cache share must be in (0, 1], have %v", share))
	}
	return func(a *Allocator, blockSize int) PrefixCache {
		return &shareCache{
			alloc: a, blockSize: blockSize, share: share, newCache: newCache,
			parts: map[string]*sharePart{}, seqSalt: map[int]string{},
		}
	}
}

// shareCache is one design instance per salt behind the PrefixCache seam.
type shareCache struct {
	alloc     *Allocator
	blockSize int
	share     float64
	newCache  func(a *Allocator, blockSize int) PrefixCache
	parts     map[string]*sharePart
	seqSalt   map[int]string // every sequence that touched a part, and its salt
	gone      int            // Evicted of parts dropped when they emptied
}

// sharePart is one salt's instance and its live sequences.
type sharePart struct {
	cache PrefixCache
	seqs  int
}

// SaltBlocks returns how many blocks c holds per salt (for tests and
// metrics), if c is a cache ShareCapped built; ok is false otherwise.
func SaltBlocks(c PrefixCache) (blocks map[string]int, ok bool) {
	s, ok := c.(*shareCache)
	if !ok {
		return nil, false
	}
	blocks = make(map[string]int, len(s.parts))
	for salt, p := range s.parts {
		blocks[salt] = p.cache.Stats().Blocks
	}
	return blocks, true
}

func (c *shareCache) join(seq int, salt string) *sharePart {
	p := c.parts[salt]
	if p == nil {
		p = &sharePart{cache: c.newCache(c.alloc, c.blockSize)}
		c.parts[salt] = p
	}
	if _, ok := c.seqSalt[seq]; !ok {
		c.seqSalt[seq] = salt
		p.seqs++
	}
	return p
}

// Match implements PrefixCache.
func (c *shareCache) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	return c.join(seq, salt).cache.Match(seq, salt, tokens)
}

// MatchLen implements PrefixCache.
func (c *shareCache) MatchLen(salt string, tokens []int32) int {
	if p := c.parts[salt]; p != nil {
		return p.cache.MatchLen(salt, tokens)
	}
	return 0
}

// Insert implements PrefixCache.
func (c *shareCache) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	return c.join(seq, salt).cache.Insert(seq, salt, tokens, pages, lent)
}

// Release implements PrefixCache.
func (c *shareCache) Release(seq int) {
	salt, ok := c.seqSalt[seq]
	if !ok {
		return // a forked sequence that never committed: the cache never saw it
	}
	delete(c.seqSalt, seq)
	p := c.parts[salt]
	p.cache.Release(seq)
	p.seqs--
	c.drop(salt)
}

// drop forgets salt's instance once it holds nothing and no sequence uses
// it, so salts that come and go do not pile up.
func (c *shareCache) drop(salt string) {
	p := c.parts[salt]
	if p == nil || p.seqs > 0 {
		return
	}
	if st := p.cache.Stats(); st.Blocks == 0 {
		c.gone += st.Evicted
		delete(c.parts, salt)
	}
}

// Evict frees up to n blocks: first from salts over their share, the one
// furthest over first, down to the share; then from the salts holding the
// most blocks. Each salt's instance picks its own least recently used
// blocks and never frees one a live sequence holds.
func (c *shareCache) Evict(n int) int {
	freed := 0
	tried := map[string]bool{}
	for freed < n {
		salt, excess := c.victim(tried)
		if excess < 0 {
			break
		}
		want := n - freed
		if excess > 0 && excess < want {
			want = excess
		}
		got := c.parts[salt].cache.Evict(want)
		if got == 0 {
			tried[salt] = true
		}
		freed += got
		c.drop(salt)
	}
	return freed
}

// victim picks the salt to evict from next among those not tried: the one
// furthest over its share (excess > 0, in blocks), else the one holding the
// most blocks (excess 0). Ties go to the smaller salt, so runs repeat.
// It returns excess -1 when no salt has an evictable block.
func (c *shareCache) victim(tried map[string]bool) (salt string, excess int) {
	total, most := 0, -1
	for s, p := range c.parts {
		n := p.cache.Stats().Blocks
		total += n
		if tried[s] || p.cache.Evictable() == 0 {
			continue
		}
		if n > most || (n == most && s < salt) {
			salt, most = s, n
		}
	}
	if most < 0 {
		return "", -1
	}
	// The largest holder is also the one furthest over a common limit.
	return salt, max(0, most-int(c.share*float64(total)))
}

// Evictable implements PrefixCache.
func (c *shareCache) Evictable() int {
	n := 0
	for _, p := range c.parts {
		n += p.cache.Evictable()
	}
	return n
}

// Holds implements PrefixCache.
func (c *shareCache) Holds(b int32) int {
	n := 0
	for _, p := range c.parts {
		n += p.cache.Holds(b)
	}
	return n
}

// Stats implements PrefixCache.
func (c *shareCache) Stats() CacheStats {
	st := CacheStats{Evicted: c.gone}
	for _, p := range c.parts {
		ps := p.cache.Stats()
		st.Blocks += ps.Blocks
		st.Evicted += ps.Evicted
	}
	return st
}

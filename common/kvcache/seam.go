package kvcache

// PrefixCache is the one seam a prefix-reuse design plugs into. The Pool
// calls it; the engine never does, and never asks which design it holds.
// A Pool with a nil PrefixCache is the phase-7 baseline: every sequence
// computes its whole prompt and owns all of its blocks.
//
// Lent and owned pages. A sequence's page table starts with the pages the
// cache lent it (from Match, later from Insert) followed by pages the pool
// allocated for it. The pool holds exactly one allocator reference for each
// owned page and none for lent ones: what keeps a lent block alive is the
// cache's business. That split is what lets each design keep its own
// ownership contract:
//
//   - a tree whose nodes count their users (one allocator reference per node,
//     node counters for sequences) adopts the pages it inserts and counts
//     users in Match/Release;
//   - a design where the allocator's count is requests + nodes increfs the
//     allocator for every user and adopts nothing;
//   - a hash index with copy-on-write does the same, and the pool's
//     PrepareWrite copies any block whose count is above one before a write.
//
// Audit checks the union: for every block, the allocator's count equals the
// owned page-table entries that name it plus Holds(block).
//
// Salts. Match, MatchLen and Insert take the request's cache salt (its
// cache_salt; "" for none). A salt names a tenant's private cache: a block
// committed under one salt is never returned to a lookup under another, so
// one tenant cannot learn from its time to first token that another sent
// the same prompt. Same salt shares; different salts never share a block;
// no salt shares only with no salt. Each design keeps salted prefixes apart
// in its own way (a root per salt, a salted first key), and every split,
// merge, eviction and copy must keep them apart too.
type PrefixCache interface {
	// Match finds the longest prefix of tokens cached under salt that a new
	// sequence seq may reuse, takes whatever references the design needs to
	// keep those blocks alive until Release(seq), and returns them. matched
	// is the number of tokens whose KV the blocks hold; blocks cover
	// ceil(matched/blockSize).
	Match(seq int, salt string, tokens []int32) (blocks []int32, matched int)

	// MatchLen returns what Match would report for matched, with no side
	// effects: no references, no LRU update. Cost-aware admission uses it.
	MatchLen(salt string, tokens []int32) int

	// Insert offers the KV of tokens, held in pages (the sequence's page
	// table), to the cache under salt, the salt seq matched with. lent is how many leading pages are already lent
	// to seq. It returns the new lent count: pages the cache adopted stop
	// being the pool's to release. The engine calls it after every finished
	// prefill chunk and again when the sequence finishes, each time with a
	// longer prefix of the same tokens, so it must accept repeats; only
	// whole blocks may be cached.
	Insert(seq int, salt string, tokens []int32, pages []int32, lent int) (newLent int)

	// Release tells the cache that seq is gone; the cache drops whatever it
	// took for seq in Match and Insert. The pool releases owned pages itself.
	Release(seq int)

	// Evict returns up to n blocks that only the cache holds to the
	// allocator, and reports how many it freed.
	Evict(n int) int

	// Evictable returns how many blocks Evict could free right now. Free
	// capacity counts them, or a full cache would stall admission forever.
	// It may overcount blocks that a live sequence also holds (a duplicate
	// the cache kept without adopting, a forked sequence's reference):
	// admission then finds fewer blocks than it hoped and waits or
	// preempts, and Evict reports only the blocks it really freed.
	Evictable() int

	// Holds returns the number of allocator references the cache itself
	// accounts for on block b (for Audit).
	Holds(b int32) int

	// Stats reports what the cache holds and has done, for metrics.
	Stats() CacheStats
}

// CacheStats are the counters every prefix cache reports.
type CacheStats struct {
	Blocks  int // blocks the cache references now
	Evicted int // blocks evicted so far
}

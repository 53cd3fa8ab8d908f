package engine

import "kvlab/common/kvcache/misses"

// missCause is who and when a block left the prefix cache: the request
// whose admission or growth ran the eviction, and the engine step it
// happened in.
type missCause struct {
	step int64
	by   int
}

// watchEvictions makes the pool report every eviction to the miss ledger,
// so that an evicted miss names the eviction that cost it (Reasons'
// EvictedAt and EvictedBy). The engine remembers which ledger key each
// cached prompt block holds (missBlocks, at most one entry per pool block).
func (e *Engine) watchEvictions() {
	e.missBlocks = make(map[int32]uint64)
	e.pool.OnEvict(e.evicted)
}

// blame names s as the request whose allocation may evict next, in the
// step now running or being planned (step).
func (e *Engine) blame(s *sequence, step int) {
	e.cause = missCause{step: int64(step), by: s.req.ID}
}

// evicted tells the ledger which remembered blocks the pool just evicted.
func (e *Engine) evicted(blocks []int32) {
	for _, b := range blocks {
		if k, ok := e.missBlocks[b]; ok {
			e.misses.Removed(k, e.cause.step, e.cause.by)
			delete(e.missBlocks, b)
		}
	}
}

// rememberBlocks notes, once keys' blocks of s are committed, which of its
// pages the prefix cache now holds and which ledger key each is. A page the
// cache did not keep (it held the same prefix in another block) is left
// out: the cache's block was remembered when it was stored.
func (e *Engine) rememberBlocks(s *sequence, keys []misses.Key) {
	pages, c := e.pool.Pages(s.key), e.pool.Cache()
	for i, k := range keys {
		if i < len(pages) && c.Holds(pages[i]) > 0 {
			e.missBlocks[pages[i]] = k.Salted
		}
	}
}

// storeCommitted tells the ledger of every whole block of s's computed
// tokens once its last commit offered them to the cache (s is finishing or
// cancelled): the output's blocks too, which a follow-up turn's prompt
// will ask for, so that a follow-up that finds them evicted says evicted,
// not cold. It hashes the tokens again, once per sequence.
func (e *Engine) storeCommitted(s *sequence) {
	if e.misses == nil {
		return
	}
	keys := misses.Keys(s.tokens[:s.computed], s.req.CacheSalt, e.pool.BlockSize())
	e.misses.Stored(keys)
	e.rememberBlocks(s, keys)
}

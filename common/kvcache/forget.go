package kvcache

// Forgetter is a prefix cache that can drop a cached prefix on demand: the
// engine's hit verifier calls it (through Pool.Forget) when a cached
// block's KV no longer equals what the model computes, so that the bad
// block is never lent again.
//
// Forget removes from the index every cached block whose prefix begins
// with tokens under salt: the block holding tokens' last whole block and
// everything cached below it, while blocks before it (and siblings of it)
// stay cached. tokens is rounded down to whole blocks; fewer than one
// block drops nothing. It returns how many blocks no lookup reaches any
// more, from the moment it returns. A block no live sequence holds gives
// its reference back at once; one a live sequence still holds stays alive
// until that sequence is released, through the sequence's own reference or
// through the cache's (a design whose readers hold none, or whose record
// of them must outlive Forget), which the cache then drops when it next
// may. The ownership audit holds throughout. A live sequence
// that holds a forgotten block may offer it again when it commits: a
// caller that must never see the block again ends or preempts those
// sequences before it forgets (the engine does).
type Forgetter interface {
	Forget(salt string, tokens []int32) (dropped int)
}

// Forget drops the cached prefix tokens under salt and everything below it
// from the prefix cache (see Forgetter), and reports how many blocks left
// it: 0 without a prefix cache, or with one that cannot forget.
//
// Tiers keep their copies. A tier entry is a copy made when the cache
// evicted the block, so a block damaged in the pool after that is good in
// the tier; one damaged before is promoted into a page table again, where
// a later verification of that hit catches it like any other. Dropping
// tier entries by prefix would mean hashing every tier key, for a case the
// verifier already covers.
func (p *Pool) Forget(salt string, tokens []int32) int {
	f, ok := p.cache.(Forgetter)
	if !ok {
		return 0
	}
	return f.Forget(salt, tokens)
}

// Package misses tells why each computed prompt token was not reused from
// the prefix cache, whatever design the cache is.
//
// A Ledger remembers the blocks the cache has ever stored, keyed by their
// chained hash twice: once salted with the tenant's cache salt, once
// without. The salted key says whether this tenant's block was cached and
// later evicted; the unsalted one tells a block another tenant holds (salt)
// from one nobody ever computed (cold). The ledger asks the design nothing,
// so the three designs are attributed alike.
//
// An eviction is named, not only inferred: the pool tells the engine which
// blocks each eviction freed, and the engine tells the ledger (Removed)
// which prompt block left, at which engine step, and which request's
// admission or growth forced it. An evicted miss then carries the latest
// such eviction among its blocks (Reasons.EvictedAt, EvictedBy). The
// engine stores a prompt's blocks when the prompt is committed and a
// finished sequence's output blocks when it ends, so a follow-up turn that
// resends an evicted answer says evicted too.
//
// There is no window or context reason, because neither makes a prompt
// token computed again. A sliding-window layer gives back out-of-window
// blocks only with the engine's WindowFree, and the engine refuses
// WindowFree together with a prefix cache: a cached prefix would have lost
// its window's KV. With a cache every layer keeps every block, so a prefix
// past the window is reused whole. A prompt longer than the context is
// refused at submission, never cut and recomputed
// (engine.TestNoTokenMissesForTheWindow).
package misses

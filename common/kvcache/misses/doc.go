// Package misses tells why each computed prompt token was not reused from
// the prefix cache, whatever design the cache is.
//
// A Ledger remembers the blocks the cache has ever stored, keyed by their
// chained hash twice: once salted with the tenant's cache salt, once
// without. The salted key says whether this tenant's block was cached and
// later evicted; the unsalted one tells a block another tenant holds (salt)
// from one nobody ever computed (cold). The ledger asks the design nothing,
// so the three designs are attributed alike.
package misses

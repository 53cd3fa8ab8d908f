package kvcache

import (
	"hash/crc32"

	"kvlab/common/kvevents"
)

// A tier is a slower store under the pool that keeps the KV of blocks the
// prefix cache evicted, so that a later prompt with the same prefix copies
// them back instead of computing them again (host memory, a disk).
//
// The pool drives its tiers without asking the design anything, as the
// Observer does:
//
//   - demotion: when the allocator frees a block the cache held (the
//     design evicted it), the block's KV is still intact; the pool copies it
//     out — tokens, chained hash, parent hash, salt flag and every layer's
//     K and V in the pool's dtype — and puts it into the first tier. A tier
//     that must make room passes what it evicts to the next tier, or drops
//     it after the last.
//   - promotion: when a sequence opens, after the design's Match, the pool
//     hashes the prompt's next whole blocks and looks for them in the
//     tiers, in order. Each block found, consecutive from the match, is
//     copied into a block the pool allocates for the sequence. The sequence
//     owns those blocks as if it had computed them; the engine starts its
//     prefill after them, and the design adopts them at the next Commit as
//     it adopts any computed block. So every design keeps its own contract:
//     it never sees a tier.
//
// A block is named in a tier by its chained hash (the Observer's hasher:
// the first block's hash carries the cache salt), so a tenant's demoted
// block is found only under its salt; the pool also compares the tokens
// before it copies. A tier keeps what it promoted (a hot prefix evicted
// again is then not copied again) until its own eviction drops it.

// TierBlock is one demoted block.
type TierBlock struct {
	Hash   kvevents.Hash
	Parent *kvevents.Hash // nil for the first block of a chain
	Tokens []int32        // BlockSize token ids
	Salted bool           // committed under a cache salt
	// KV is every layer's K then V rows, layer after layer, in the pool's
	// dtype as Pool.AppendBlock writes them: Layers × BlockBytes bytes.
	KV []byte
	// Sum is the CRC-32C of KV when it was demoted; a block whose KV no
	// longer matches is never promoted.
	Sum uint32
}

// Size is the bytes a tier charges for b: its KV and its tokens.
func (b TierBlock) Size() int64 { return int64(len(b.KV) + 4*len(b.Tokens)) }

// Intact reports whether b's KV is the KV that was demoted.
func (b *TierBlock) Intact() bool { return TierSum(b.KV) == b.Sum }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// TierSum is the checksum TierBlock.Sum holds: CRC-32C, which modern CPUs
// compute in hardware, of kv.
func TierSum(kv []byte) uint32 { return crc32.Checksum(kv, castagnoli) }

// Tier is a store of demoted blocks. The pool calls it on the engine's
// goroutine, so Put and Get must be quick: a tier on a slow medium queues
// its writes for a goroutine of its own and never makes the engine wait.
type Tier interface {
	// Name is where the tier keeps blocks, as vLLM's KV events name a
	// block's medium: "CPU" for host memory, "DISK".
	Name() string
	// Put stores b, taking b.KV; a block of the same hash is replaced.
	Put(b TierBlock)
	// Get returns the block of hash h, or false. The tier keeps it.
	Get(h kvevents.Hash) (TierBlock, bool)
	// Has reports whether Get would find h, with no side effect.
	Has(h kvevents.Hash) bool
	// Stats reports what the tier holds and has done.
	Stats() TierStats
}

// TierEvents is what a tier implements to have its blocks announced in
// the pool's KV events, as vLLM's offloading announces a CPU copy: a
// BlockStored when it takes a block, a BlockRemoved when it lets one go,
// each with Medium set to its Name. AttachTiers wires it to the observer.
type TierEvents interface {
	// SetEventSink makes the tier call sink with each event. sink takes
	// only the observer's own short lock and never calls back, so a tier
	// may call it holding its own lock.
	SetEventSink(sink func(kvevents.Event))
	// StoredEvents returns one BlockStored per block the tier holds, for
	// the state a new subscriber starts from.
	StoredEvents() []kvevents.Event
}

// StoredEvent is b's BlockStored in medium, as a tier announces it.
func StoredEvent(b *TierBlock, medium string) kvevents.Event {
	return kvevents.Event{Type: kvevents.BlockStored, BlockHashes: []kvevents.Hash{b.Hash}, ParentBlockHash: b.Parent,
		TokenIDs: b.Tokens, BlockSize: len(b.Tokens), Medium: medium}
}

// RemovedEvent is block h's BlockRemoved in medium.
func RemovedEvent(h kvevents.Hash, medium string) kvevents.Event {
	return kvevents.Event{Type: kvevents.BlockRemoved, BlockHashes: []kvevents.Hash{h}, Medium: medium}
}

// TierStats are the counters of one tier.
type TierStats struct {
	Name      string
	Blocks    int   // blocks held now
	Bytes     int64 // their Size, summed
	Capacity  int64 // the byte budget
	Puts      int   // blocks stored (demoted into it, or passed down to it)
	Hits      int   // blocks promoted from it
	Evictions int   // blocks it dropped or passed on to make room
	Dropped   int   // blocks it could not store (too big, a write queue full, a write failed)
	Corrupt   int   // blocks found whose KV failed its checksum, never promoted
}

// Package kvcache holds the paged KV cache: a refcounted block allocator, a
// pool of per-sequence page tables over it, an audit of block ownership, and
// the seam (PrefixCache) through which a prefix-reuse design shares blocks
// between sequences.
//
// Memory is cut into blocks of BlockSize token slots. A sequence's page table
// lists its blocks in order, so token position p lives in slot
// Pages[p/BlockSize]*BlockSize + p%BlockSize of every layer's K and V
// tensors. Nothing is ever contiguous per sequence; that is what lets blocks
// be shared and reused without copying.
package kvcache

import (
	"fmt"
	"slices"

	"kvlab/kernels"
)

// Config sizes a Pool.
type Config struct {
	Layers    int // transformer layers (one K and one V tensor each)
	KVDim     int // KV heads × head dim: the width of one slot
	Blocks    int // number of blocks
	BlockSize int // token slots per block
	// DType is what the K and V tensors hold each feature as: float32 (the
	// zero value), or bfloat16 or float16 for half the memory, on a
	// backend that has 16-bit caches (kernels.KVCacher).
	DType kernels.KVDType
	// NewCache, when set, builds the prefix cache the pool consults. Nil is
	// the phase-7 baseline: no reuse.
	NewCache func(a *Allocator, blockSize int) PrefixCache
	// Windows gives each layer's sliding window (0: a global layer); only
	// LocalBlocks reads it.
	Windows []int
	// LocalBlocks, when > 0, gives back sliding-window layers' blocks once
	// they fall out of every window still to come: the local layers keep
	// their KV in a storage of LocalBlocks blocks of their own, through a
	// second page table per sequence (windowfree.go). 0: every layer keeps
	// every block of the sequence's one page table. It cannot go with a
	// prefix cache, which would lend blocks whose local-layer KV is gone.
	LocalBlocks int
	// TailBlocks, when > 0, keeps the partial last blocks of up to that
	// many ended sequences, so that a prompt continuing one of them
	// exactly copies the block instead of computing its tokens again
	// (tail.go). It needs a prefix cache. 0: only whole blocks are reused.
	TailBlocks int
}

// Validate reports an impossible configuration.
func (c Config) Validate() error {
	switch {
	case c.Layers <= 0:
		return fmt.Errorf("kvcache: layers must be positive, have %d", c.Layers)
	case c.KVDim <= 0:
		return fmt.Errorf("kvcache: kv width must be positive, have %d", c.KVDim)
	case c.Blocks <= 0:
		return fmt.Errorf("kvcache: blocks must be positive, have %d", c.Blocks)
	case c.BlockSize <= 0:
		return fmt.Errorf("kvcache: block size must be positive, have %d", c.BlockSize)
	case c.LocalBlocks < 0:
		return fmt.Errorf("kvcache: local blocks must not be negative, have %d", c.LocalBlocks)
	case c.DType != kernels.KVF32 && c.DType != kernels.KVBF16 && c.DType != kernels.KVF16:
		return fmt.Errorf("kvcache: unknown KV dtype %v", c.DType)
	case c.TailBlocks < 0:
		return fmt.Errorf("kvcache: tail blocks must not be negative, have %d", c.TailBlocks)
	case c.TailBlocks > 0 && c.NewCache == nil:
		return fmt.Errorf("kvcache: tail blocks continue a prefix cache's match, and this pool has no prefix cache")
	case c.LocalBlocks > 0 && len(c.Windows) != c.Layers:
		return fmt.Errorf("kvcache: local blocks need a window for each of the %d layers, have %d", c.Layers, len(c.Windows))
	}
	return nil
}

// Pool is the paged KV cache: per-layer K and V storage, one page table per
// live sequence, and the allocator behind them.
type Pool struct {
	blockSize int
	alloc     *Allocator
	cache     PrefixCache // nil: no prefix reuse
	be        kernels.Backend
	dtype     kernels.KVDType
	k, v      []kernels.Tensor // per layer; rows are slots
	seqs      map[int]*seqPages
	copies    int                  // blocks copied by PrepareWrite
	obs       *Observer            // nil unless KV events were asked for (Observe)
	tr        Tracer               // nil unless a trace was asked for (SetTracer)
	tiers     *tiering             // nil unless tiers were attached (AttachTiers)
	onEvict   func(blocks []int32) // nil unless OnEvict set one

	// local is nil unless local layers give back out-of-window blocks
	// (Config.LocalBlocks; windowfree.go).
	local *localPages
	// tails is nil unless the pool keeps ended sequences' partial last
	// blocks (Config.TailBlocks; tail.go).
	tails *tailStore
}

// seqPages is one sequence's view of the pool.
type seqPages struct {
	// pages lists the sequence's blocks in position order.
	pages []int32
	// lent is how many leading pages the prefix cache lent; the pool holds
	// one allocator reference for each of pages[lent:] and none for the rest.
	lent int
	// salt is the cache salt the sequence was opened with: every commit of
	// its KV goes under it, so it never lands in another tenant's cache.
	salt string
	// prompt and committed are the tokens Open was given and those of the
	// latest Commit, kept only with tails (tail.go): Release keeps the
	// blocks where each ends.
	prompt, committed []int32
}

// NewPool allocates the KV storage on be and returns an empty pool.
func NewPool(be kernels.Backend, c Config) (*Pool, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		blockSize: c.BlockSize,
		alloc:     NewAllocator(c.Blocks),
		be:        be,
		dtype:     c.DType,
		seqs:      make(map[int]*seqPages),
	}
	if c.LocalBlocks > 0 {
		var err error
		if p.local, err = newLocalPages(c.Windows, c.LocalBlocks, c.BlockSize); err != nil {
			return nil, err
		}
	}
	for l := range c.Layers {
		rows := c.Blocks * c.BlockSize
		if p.LocalLayer(l) {
			rows = c.LocalBlocks * c.BlockSize
		}
		k, err := kernels.NewKV(be, rows, c.KVDim, c.DType)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("kvcache: %w", err)
		}
		v, _ := kernels.NewKV(be, rows, c.KVDim, c.DType)
		p.k, p.v = append(p.k, k), append(p.v, v)
	}
	if c.NewCache != nil {
		p.cache = c.NewCache(p.alloc, c.BlockSize)
	}
	if c.TailBlocks > 0 {
		p.tails = newTailStore(c.TailBlocks)
	}
	return p, nil
}

// Close frees the KV storage.
func (p *Pool) Close() {
	for i := range p.k {
		p.be.Free(p.k[i])
		p.be.Free(p.v[i])
	}
	p.k, p.v = nil, nil
}

// Layer returns layer l's K and V tensors (rows are slots).
func (p *Pool) Layer(l int) (k, v kernels.Tensor) { return p.k[l], p.v[l] }

// DType returns the dtype the pool holds KV in.
func (p *Pool) DType() kernels.KVDType { return p.dtype }

// BlockSize returns the number of token slots per block.
func (p *Pool) BlockSize() int { return p.blockSize }

// Allocator exposes the block allocator (for metrics and tests).
func (p *Pool) Allocator() *Allocator { return p.alloc }

// Cache returns the prefix cache, or nil.
func (p *Pool) Cache() PrefixCache { return p.cache }

// BlocksFor returns the number of blocks that hold n tokens.
func (p *Pool) BlocksFor(n int) int { return (n + p.blockSize - 1) / p.blockSize }

// FreeTokens returns how many more token slots could be allocated now:
// free blocks plus blocks the prefix cache could evict on demand and kept
// tails no sequence shares (with
// LocalBlocks, the fewer of the free global and local blocks: Grow takes
// one of each per new entry).
func (p *Pool) FreeTokens() int {
	free := p.alloc.NumFree()
	if p.cache != nil {
		free += p.cache.Evictable()
	}
	if p.tails != nil {
		free += p.tails.freeable(p.alloc)
	}
	if p.local != nil {
		free = min(free, p.local.alloc.NumFree())
	}
	return free * p.blockSize
}

// UsedBlocks returns the number of blocks with at least one holder.
func (p *Pool) UsedBlocks() int { return p.alloc.Total() - p.alloc.NumFree() }

// MatchLen returns how many prompt tokens a new sequence opened with salt
// would find cached, in the cache, its tiers or the kept tails, without
// taking anything (0 without a prefix cache).
func (p *Pool) MatchLen(salt string, tokens []int32) int {
	if p.cache == nil {
		return 0
	}
	n := p.cache.MatchLen(salt, tokens)
	n += p.tierMatchLen(salt, tokens, n)
	return n + p.tailMatchLen(salt, tokens, n)
}

// Open starts a page table for sequence id, whose request carries the cache
// salt salt ("" for none). With a prefix cache the table begins with the
// blocks of the longest prefix of prompt cached under the same salt, and
// cached is the number of tokens whose KV they already hold. The pool keeps
// the salt: the sequence's commits, and its forks', go under it.
func (p *Pool) Open(id int, salt string, prompt []int32) (cached int, err error) {
	if _, ok := p.seqs[id]; ok {
		return 0, fmt.Errorf("kvcache: sequence %d already open", id)
	}
	s := &seqPages{salt: salt}
	if p.tails != nil {
		s.prompt = prompt
	}
	if p.cache != nil {
		var blocks []int32
		blocks, cached = p.cache.Match(id, salt, prompt)
		s.pages = append(s.pages, blocks...)
		s.lent = len(blocks)
		if p.tr != nil {
			p.tr.PoolEvent(TraceEvent{Op: TraceMatch, Seq: id, Tokens: len(prompt), Matched: cached, Blocks: blocks})
		}
	}
	p.seqs[id] = s
	if p.local != nil {
		p.local.open(id)
	}
	if p.obs != nil {
		p.obs.open(id)
	}
	if p.tiers != nil {
		cached += p.promote(id, s, prompt, cached)
	}
	cached += p.tailHit(id, s, prompt, cached)
	return cached, nil
}

// Fork opens sequence child sharing every page of parent: each owned page
// gains a holder, so the first write into one of them copies it (see
// PrepareWrite). Lent pages stay lent to the parent only; the child takes
// its own allocator reference on them. The child inherits the parent's
// salt: it holds the parent's KV, which belongs to the parent's tenant.
func (p *Pool) Fork(parent, child int) error {
	s, ok := p.seqs[parent]
	if !ok {
		return fmt.Errorf("kvcache: fork of unknown sequence %d", parent)
	}
	if _, ok := p.seqs[child]; ok {
		return fmt.Errorf("kvcache: sequence %d already open", child)
	}
	c := &seqPages{pages: append([]int32(nil), s.pages...), salt: s.salt, prompt: s.prompt, committed: s.committed}
	for _, b := range c.pages {
		p.alloc.Incref(b)
	}
	p.seqs[child] = c
	if p.local != nil {
		p.local.fork(parent, child)
	}
	if p.tr != nil {
		p.tr.PoolEvent(TraceEvent{Op: TraceFork, Seq: parent, Other: child, Blocks: c.pages})
	}
	return nil
}

// Grow makes sequence id's page table cover n tokens. It allocates every
// missing block or none: when the allocator is short it first asks the
// prefix cache to evict, and returns an *OutOfBlocksError if that is not
// enough, leaving the table as it was.
func (p *Pool) Grow(id, n int) error {
	s, ok := p.seqs[id]
	if !ok {
		return fmt.Errorf("kvcache: grow of unknown sequence %d", id)
	}
	need := p.BlocksFor(n) - len(s.pages)
	if need <= 0 {
		return nil
	}
	if p.local != nil {
		if err := p.local.short(id, p.BlocksFor(n)); err != nil {
			return err
		}
	}
	if err := p.reserve(need); err != nil {
		return err
	}
	s.pages, _ = p.alloc.Allocate(s.pages, need) // reserve guaranteed enough
	if p.local != nil {
		p.local.grow(id, len(s.pages))
	}
	if p.tr != nil {
		p.tr.PoolEvent(TraceEvent{Op: TraceGrow, Seq: id, Blocks: s.pages[len(s.pages)-need:]})
	}
	return nil
}

// reserve makes at least n blocks free, giving back kept tails and then
// evicting cached blocks if it must.
func (p *Pool) reserve(n int) error {
	if short := n - p.alloc.NumFree(); short > 0 && p.tails != nil {
		free := p.alloc.NumFree()
		p.freeTails(short)
		if p.tr != nil {
			p.tr.PoolEvent(TraceEvent{Op: TraceEvict, Want: short, Blocks: p.freedSince(free)})
		}
	}
	if short := n - p.alloc.NumFree(); short > 0 && p.cache != nil {
		free := p.alloc.NumFree()
		p.cache.Evict(short)
		if p.onEvict != nil {
			if b := p.freedSince(free); len(b) > 0 {
				p.onEvict(b)
			}
		}
		if p.tr != nil {
			p.tr.PoolEvent(TraceEvent{Op: TraceEvict, Want: short, Blocks: p.freedSince(free)})
		}
		if p.obs != nil {
			p.obs.settle()
		}
	}
	if !p.alloc.CanAllocate(n) {
		return &OutOfBlocksError{Want: n, Free: p.alloc.NumFree()}
	}
	return nil
}

// PrepareWrite makes the blocks holding positions [from, from+n) of sequence
// id private before the caller writes KV there: a block with more than one
// holder is copied to a fresh block (copy-on-write), the copy replaces it in
// the page table, and the original loses this sequence's reference. Lent
// blocks are the cache's and must never be written; asking is an error.
func (p *Pool) PrepareWrite(id, from, n int) error {
	s, ok := p.seqs[id]
	if !ok {
		return fmt.Errorf("kvcache: write to unknown sequence %d", id)
	}
	if n <= 0 {
		return nil
	}
	first, last := from/p.blockSize, (from+n-1)/p.blockSize
	if last >= len(s.pages) {
		return fmt.Errorf("kvcache: write to position %d of sequence %d beyond its %d blocks", from+n-1, id, len(s.pages))
	}
	if first < s.lent {
		return fmt.Errorf("kvcache: write to position %d of sequence %d lands in a block lent by the prefix cache", from, id)
	}
	for i := first; i <= last; i++ {
		old := s.pages[i]
		if p.alloc.Refs(old) == 1 {
			continue
		}
		if err := p.reserve(1); err != nil {
			// With no room for a copy, a kept tail gives its block up to
			// the sequence rather than fail it: a tail is the least a
			// block can be worth.
			if !p.dropTailOf(old) || p.alloc.Refs(old) > 1 {
				return err
			}
			continue
		}
		fresh, _ := p.alloc.Allocate(nil, 1)
		p.copyRows(old, fresh[0])
		p.alloc.Decref(old)
		s.pages[i] = fresh[0]
		p.copies++
		if p.tr != nil {
			p.tr.PoolEvent(TraceEvent{Op: TraceCopy, Seq: id, Page: i, Blocks: []int32{old, fresh[0]}})
		}
	}
	if p.local != nil {
		return p.local.prepareWrite(p, id, first, last)
	}
	return nil
}

// Copies returns how many blocks PrepareWrite has copied.
func (p *Pool) Copies() int { return p.copies }

// Pages returns sequence id's page table. The slice is the pool's own; the
// caller must not modify it, and it changes on the next Grow or PrepareWrite.
func (p *Pool) Pages(id int) []int32 {
	if s, ok := p.seqs[id]; ok {
		return s.pages
	}
	return nil
}

// Slots appends to dst the KV slot of each position in [from, from+n) of
// sequence id. The page table must already cover them (see Grow).
func (p *Pool) Slots(dst []int32, id, from, n int) []int32 {
	pages := p.seqs[id].pages
	bs := p.blockSize
	for pos := from; pos < from+n; pos++ {
		dst = append(dst, pages[pos/bs]*int32(bs)+int32(pos%bs))
	}
	return dst
}

// Commit offers the KV of tokens (positions 0..len(tokens)-1 of sequence id,
// already written) to the prefix cache, if there is one. Committing a longer
// prefix of the same tokens later is expected (see PrefixCache.Insert). They
// go under the salt the sequence was opened with.
func (p *Pool) Commit(id int, tokens []int32) {
	if p.cache == nil {
		return
	}
	s := p.seqs[id]
	var ev TraceEvent
	if p.tr != nil {
		ev = TraceEvent{Op: TraceCommit, Seq: id, Tokens: len(tokens)}
		ev.Cached[0], ev.Lent[0] = p.cache.Stats().Blocks, s.lent
	}
	s.lent = p.cache.Insert(id, s.salt, tokens, s.pages, s.lent)
	if p.tails != nil {
		s.committed = tokens
	}
	if p.obs != nil {
		p.obs.commit(id, s.salt, tokens, s.pages)
	}
	if p.tr != nil {
		ev.Cached[1], ev.Lent[1] = p.cache.Stats().Blocks, s.lent
		p.tr.PoolEvent(ev)
	}
}

// Release ends sequence id: the pool drops its reference on every owned
// page, and the prefix cache drops whatever it took for id. Releasing an
// unknown id is a no-op, so error paths can release unconditionally.
func (p *Pool) Release(id int) {
	s, ok := p.seqs[id]
	if !ok {
		return
	}
	free := p.alloc.NumFree()
	kept := p.keepTails(id, s)
	for i, b := range s.pages[s.lent:] {
		if !slices.Contains(kept, s.lent+i) {
			p.alloc.Decref(b)
		}
	}
	if p.local != nil {
		p.local.release(id)
	}
	if p.cache != nil {
		p.cache.Release(id)
	}
	if p.obs != nil {
		p.obs.release(id)
	}
	if p.tiers != nil {
		delete(p.tiers.promoted, id)
	}
	if p.tr != nil {
		p.tr.PoolEvent(TraceEvent{Op: TraceRelease, Seq: id, Blocks: p.freedSince(free)})
	}
	delete(p.seqs, id)
}

// Live returns the number of open sequences.
func (p *Pool) Live() int { return len(p.seqs) }

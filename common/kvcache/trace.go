package kvcache

import (
	"fmt"
	"io"
	"maps"
	"slices"
)

// TraceOp names what a traced pool operation did.
type TraceOp int

const (
	// TraceMatch: Open looked the prompt up in the prefix cache. Tokens is
	// the prompt's length, Matched the tokens found, Blocks the blocks lent.
	TraceMatch TraceOp = iota + 1
	// TraceGrow: Grow allocated Blocks for sequence Seq.
	TraceGrow
	// TraceCommit: Commit offered Tokens tokens of Seq to the cache (the
	// design's Insert). Cached is the cache's block count before and after,
	// Lent the sequence's lent pages before and after (what the cache
	// adopted).
	TraceCommit
	// TraceEvict: the pool was Want blocks short and the cache freed Blocks.
	TraceEvict
	// TraceCopy: PrepareWrite copied page Page of Seq (copy-on-write):
	// Blocks is {shared block, private copy}.
	TraceCopy
	// TraceFork: Other was opened sharing every page of Seq.
	TraceFork
	// TraceRelease: Seq ended; Blocks went back to the free list.
	TraceRelease
	// TraceTailKeep: Seq ended with a partial block of Tokens committed
	// tokens, and the pool kept it, Blocks[0] (Config.TailBlocks).
	TraceTailKeep
	// TraceTailHit: Seq opened after a kept tail: Blocks is {the kept
	// block, Seq's private copy}, whose first Tokens rows it reuses.
	TraceTailHit
)

// TraceEvent is one pool operation, as a Tracer sees it. Blocks is only
// valid during the call: copy it to keep it.
type TraceEvent struct {
	Op      TraceOp
	Seq     int
	Other   int // TraceFork: the child
	Tokens  int
	Matched int
	Page    int
	Want    int
	Cached  [2]int
	Lent    [2]int
	Blocks  []int32
}

// Tracer is told of every pool operation that changes who holds a block.
// A pool without one (the default) pays a nil check per operation.
type Tracer interface {
	PoolEvent(TraceEvent)
}

// Dumper is what a prefix cache implements to draw its structure for a
// trace: nodes or chains, with block ids and holder counts. It is optional.
type Dumper interface {
	Dump(w io.Writer)
}

// DumpBranch is how a Dumper draws a tree: the branch before a child
// ("├─ ", or "└─ " for the last of its siblings) and what the child's own
// children are indented by under it.
func DumpBranch(last bool) (branch, indent string) {
	if last {
		return "└─ ", "   "
	}
	return "├─ ", "│  "
}

// SetTracer sends the pool's operations to t; nil turns tracing off.
func (p *Pool) SetTracer(t Tracer) { p.tr = t }

// freedSince returns the blocks freed since the free list had n entries:
// the allocator pushes freed blocks on top of its stack.
func (p *Pool) freedSince(n int) []int32 {
	if len(p.alloc.free) <= n {
		return nil
	}
	return p.alloc.free[n:]
}

// Dump writes the allocator's counts, every live sequence's page table and,
// when the prefix cache is a Dumper, the cache's structure. Counts: free
// blocks have no holder; held blocks are named by some live page table;
// cached blocks are referenced by the prefix cache (a block may be both).
// name names a sequence; nil names sequence 3 "s3".
func (p *Pool) Dump(w io.Writer, name func(seq int) string) {
	if name == nil {
		name = func(seq int) string { return fmt.Sprintf("s%d", seq) }
	}
	inTable := map[int32]bool{}
	ids := make([]int, 0, len(p.seqs))
	for id, s := range p.seqs {
		ids = append(ids, id)
		for _, b := range s.pages {
			inTable[b] = true
		}
	}
	slices.Sort(ids)
	cached := 0
	if p.cache != nil {
		cached = p.cache.Stats().Blocks
	}
	fmt.Fprintf(w, "blocks: %d free, %d held, %d cached (of %d)\n", p.alloc.NumFree(), len(inTable), cached, p.alloc.Total())
	for _, id := range ids {
		s := p.seqs[id]
		fmt.Fprintf(w, "%s pages %v", name(id), s.pages)
		if s.lent > 0 {
			fmt.Fprintf(w, " (first %d lent)", s.lent)
		}
		fmt.Fprintln(w)
	}
	if d, ok := p.cache.(Dumper); ok {
		d.Dump(w)
	}
}

// Dump draws each salt's share of the cache (ShareCapped), one instance
// per salt, when the design is a Dumper.
func (c *shareCache) Dump(w io.Writer) {
	for _, s := range slices.Sorted(maps.Keys(c.parts)) {
		fmt.Fprintf(w, "share of salt %q:\n", s)
		if d, ok := c.parts[s].cache.(Dumper); ok {
			d.Dump(w)
		}
	}
}

// BlockState is one block as a trace draws it.
type BlockState struct {
	Refs   int  // the allocator's count: 0 is free
	Held   bool // some live page table names it
	Cached int  // references the prefix cache accounts for (PrefixCache.Holds)
}

// BlockStates returns the state of every block, by block id.
func (p *Pool) BlockStates() []BlockState {
	out := make([]BlockState, p.alloc.Total())
	for _, s := range p.seqs {
		for _, b := range s.pages {
			out[b].Held = true
		}
	}
	for b := range out {
		out[b].Refs = p.alloc.Refs(int32(b))
		if p.cache != nil && out[b].Refs > 0 {
			out[b].Cached = p.cache.Holds(int32(b))
		}
	}
	return out
}

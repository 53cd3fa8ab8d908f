package kvcache

import (
	"fmt"
	"strings"
)

// AuditReport lists every way the pool's block ownership is broken. The zero
// value means all is well.
type AuditReport struct {
	// Leaked blocks have more allocator references than holders: nobody
	// will ever free them.
	Leaked []int32
	// Overfreed blocks have fewer allocator references than holders: one
	// holder is reading memory the allocator may hand out again.
	Overfreed []int32
	// DoubleFreed blocks were released while already free.
	DoubleFreed []int32
	// FreeListBroken is set when the free list disagrees with the counts.
	FreeListBroken string
	// Local is the same report for the local layers' blocks when the pool
	// gives back out-of-window blocks (Config.LocalBlocks), else nil.
	Local *AuditReport
	// Tiers lists what the cache tiers' own audits found (TierAuditor).
	Tiers []string
}

// TierAuditor is implemented by a cache tier that can recount its books:
// its index against its contents, its bytes against its budget, each
// block's KV against its checksum.
type TierAuditor interface {
	AuditTier() error
}

// Clean reports whether the audit found nothing.
func (r AuditReport) Clean() bool {
	return len(r.Leaked) == 0 && len(r.Overfreed) == 0 && len(r.DoubleFreed) == 0 && r.FreeListBroken == "" &&
		(r.Local == nil || r.Local.Clean()) && len(r.Tiers) == 0
}

// Err returns nil for a clean report and a readable error otherwise.
func (r AuditReport) Err() error {
	if r.Clean() {
		return nil
	}
	var parts []string
	if len(r.Leaked) > 0 {
		parts = append(parts, fmt.Sprintf("leaked blocks %v", r.Leaked))
	}
	if len(r.Overfreed) > 0 {
		parts = append(parts, fmt.Sprintf("blocks with fewer references than holders %v", r.Overfreed))
	}
	if len(r.DoubleFreed) > 0 {
		parts = append(parts, fmt.Sprintf("double-freed blocks %v", r.DoubleFreed))
	}
	if r.FreeListBroken != "" {
		parts = append(parts, r.FreeListBroken)
	}
	if r.Local != nil && !r.Local.Clean() {
		parts = append(parts, "local layers: "+strings.TrimPrefix(r.Local.Err().Error(), "kvcache: audit: "))
	}
	parts = append(parts, r.Tiers...)
	return fmt.Errorf("kvcache: audit: %s", strings.Join(parts, "; "))
}

// Audit checks the block-ownership invariant: every block's allocator
// count equals the owned page-table entries that name it plus the
// references the prefix cache says it holds, and the free list holds
// exactly the blocks with a count of zero. Tests call it after every engine
// step.
func (p *Pool) Audit() AuditReport {
	var r AuditReport
	holders := make([]int, p.alloc.Total())
	for _, s := range p.seqs {
		for _, b := range s.pages[s.lent:] {
			holders[b]++
		}
	}
	if p.tails != nil {
		for b, n := range p.tails.holds() {
			holders[b] += n
		}
	}
	for b := range holders {
		want := holders[b]
		if p.cache != nil {
			want += p.cache.Holds(int32(b))
		}
		have := p.alloc.Refs(int32(b))
		switch {
		case have > want:
			r.Leaked = append(r.Leaked, int32(b))
		case have < want:
			r.Overfreed = append(r.Overfreed, int32(b))
		}
	}
	r.DoubleFreed = append(r.DoubleFreed, p.alloc.doubleFrees...)
	r.FreeListBroken = p.alloc.checkFreeList()
	if p.local != nil {
		local := p.local.audit()
		r.Local = &local
	}
	for _, t := range p.Tiers() {
		if a, ok := t.(TierAuditor); ok {
			if err := a.AuditTier(); err != nil {
				r.Tiers = append(r.Tiers, fmt.Sprintf("tier %s: %v", t.Name(), err))
			}
		}
	}
	if p.tiers != nil {
		for id := range p.tiers.promoted {
			if _, ok := p.seqs[id]; !ok {
				r.Tiers = append(r.Tiers, fmt.Sprintf("promotions of sequence %d, which is not open", id))
			}
		}
	}
	return r
}

// checkFreeList returns a description of any disagreement between the free
// stack and the reference counts, or "".
func (a *Allocator) checkFreeList() string {
	seen := make([]bool, len(a.refs))
	for _, b := range a.free {
		if seen[b] {
			return fmt.Sprintf("block %d is on the free list twice", b)
		}
		seen[b] = true
		if a.refs[b] != 0 {
			return fmt.Sprintf("block %d is on the free list with %d references", b, a.refs[b])
		}
	}
	for b, r := range a.refs {
		if r == 0 && !seen[b] {
			return fmt.Sprintf("free block %d is missing from the free list", b)
		}
	}
	return ""
}

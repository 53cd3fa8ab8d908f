package kvcache

import (
	"errors"
	"slices"
	"time"

	"kvlab/common/kvevents"
)

// tiering is the pool's side of its tiers (tier.go): demotion when the
// allocator frees a cached block, promotion when a sequence opens.
type tiering struct {
	tiers   []Tier
	scratch []float32 // one block's K and V rows, for AppendBlock

	// The promotion rule: a tier is skipped while copying a block from it
	// takes longer than computing a block's worth of prompt rows. Both are
	// measured: promote[i] holds tier i's latest times per promoted block,
	// prefill the forward pass's latest times per row (NotePrefill), and
	// the rule compares their medians, which one slow moment (a thread
	// descheduled, a collection) does not move. Until both have been
	// measured minSamples times every tier is used; a skipped tier is tried again every probeEvery
	// skips, so its cost is measured again as things change.
	promote  []window
	prefill  window
	skips    []int
	costRule bool // false: promote whatever it costs (SetTierCostRule)

	stats    TierCounters
	promoted map[int][]int // per open sequence: tokens promoted from each tier
}

// TierCounters are what the pool did with its tiers.
type TierCounters struct {
	Demoted     int   // blocks copied into the first tier
	DemotedKept int   // blocks evicted that the first tier held already (not copied again)
	Promoted    []int // blocks copied back, per tier
	Skipped     []int // promotions skipped by the cost rule, per tier
	Mismatched  int   // blocks found under a hash whose tokens differ (never promoted)
	// What the promotion rule weighs: per tier, the median of a promoted
	// block's latest times (0 until one is promoted), and of the forward
	// pass's latest times per row.
	PromoteNanos       []float64
	PrefillNanosPerRow float64
}

const (
	probeEvery = 16
	minSamples = 5 // of each time, before the rule may skip a tier
)

// window keeps the latest samples of a time, for their median.
type window struct {
	xs   [15]float64
	n, i int // samples held, next slot
}

func (w *window) add(x float64) {
	w.xs[w.i] = x
	w.i = (w.i + 1) % len(w.xs)
	w.n = min(w.n+1, len(w.xs))
}

// median is the samples' median, 0 before any.
func (w *window) median() float64 {
	if w.n == 0 {
		return 0
	}
	s := slices.Clone(w.xs[:w.n])
	slices.Sort(s)
	return s[w.n/2]
}

// AttachTiers puts tiers under the prefix cache, fastest first: blocks the
// cache evicts are demoted into tiers[0] (which passes what it evicts on),
// and a sequence that opens gets, after the cache's match, the blocks the
// tiers hold for its prompt. Blocks are named by the pool's observer (the
// one Observe attached, or a new one that queues no events until Observe
// asks for them): attach both before the first sequence opens. A pool
// without a prefix cache has nothing to demote, and a pool whose local
// layers keep their own blocks (Config.LocalBlocks) is not built for
// tiers: both are errors.
func (p *Pool) AttachTiers(tiers ...Tier) error {
	switch {
	case p.cache == nil:
		return errors.New("kvcache: tiers need a prefix cache: nothing is evicted without one")
	case p.local != nil:
		return errors.New("kvcache: tiers are not built for local layers with blocks of their own (LocalBlocks)")
	case len(tiers) == 0:
		return errors.New("kvcache: no tier to attach")
	case len(p.seqs) > 0:
		return errors.New("kvcache: attach tiers before the first sequence opens")
	}
	if p.obs == nil {
		p.ObserveWith(kvevents.NewHasher(kvevents.SHA256CBOR, kvevents.DefaultHashSeed, "")).quiet = true
	}
	p.tiers = &tiering{
		tiers: tiers, scratch: make([]float32, 2*p.blockSize*p.KVDim()),
		promote: make([]window, len(tiers)), skips: make([]int, len(tiers)), costRule: true,
		stats:    TierCounters{Promoted: make([]int, len(tiers)), Skipped: make([]int, len(tiers))},
		promoted: make(map[int][]int),
	}
	p.obs.demote = p.demote
	for _, tier := range tiers {
		if te, ok := tier.(TierEvents); ok {
			te.SetEventSink(p.obs.tierEvent)
			p.obs.tiers = append(p.obs.tiers, te)
		}
	}
	return nil
}

// Tiers returns the pool's tiers, fastest first (none without AttachTiers).
func (p *Pool) Tiers() []Tier {
	if p.tiers == nil {
		return nil
	}
	return p.tiers.tiers
}

// TierCounters returns what the pool did with its tiers so far.
func (p *Pool) TierCounters() TierCounters {
	if p.tiers == nil {
		return TierCounters{}
	}
	c := p.tiers.stats
	c.Promoted, c.Skipped = slices.Clone(c.Promoted), slices.Clone(c.Skipped)
	c.PromoteNanos = make([]float64, len(p.tiers.promote))
	for i := range p.tiers.promote {
		c.PromoteNanos[i] = p.tiers.promote[i].median()
	}
	c.PrefillNanosPerRow = p.tiers.prefill.median()
	return c
}

// PromotedTokens returns, for open sequence id, the prompt tokens its Open
// copied from each tier (nil without tiers).
func (p *Pool) PromotedTokens(id int) []int {
	if p.tiers == nil {
		return nil
	}
	return p.tiers.promoted[id]
}

// SetTierCostRule turns the promotion rule on (the default) or off. Off,
// every block a tier holds is promoted whatever it costs: what a test or
// an experiment that counts promotions needs to be the same on every
// machine.
func (p *Pool) SetTierCostRule(on bool) {
	if p.tiers != nil {
		p.tiers.costRule = on
	}
}

// NotePrefill tells the promotion rule that a forward pass over rows rows
// took d. The engine calls it after each step that computed prompt rows.
func (p *Pool) NotePrefill(rows int, d time.Duration) {
	if p.tiers == nil || rows <= 0 {
		return
	}
	p.tiers.prefill.add(float64(d.Nanoseconds()) / float64(rows))
}

// demote copies block b, which holds e's KV and which the allocator has
// just freed (its KV is intact until it is handed out again), into the
// first tier. The observer calls it with its lock held, on the engine's
// goroutine, when the last block carrying e's hash goes.
func (p *Pool) demote(e *announced, b int32) {
	t := p.tiers
	first := t.tiers[0]
	if first.Has(e.hash) {
		t.stats.DemotedKept++
		return
	}
	kv := make([]byte, 0, len(p.k)*p.BlockBytes())
	for l := range p.k {
		kv = p.AppendBlock(kv, l, b, t.scratch)
	}
	first.Put(TierBlock{Hash: e.hash, Parent: e.parent, Tokens: e.tokens, Salted: e.salted, KV: kv, Sum: TierSum(kv)})
	t.stats.Demoted++
}

// promote extends sequence id's page table, whose first cached tokens of
// prompt the cache matched, with the blocks the tiers hold for the whole
// blocks that follow, and returns the tokens it added. It stops at the
// first block no tier holds, whose tokens differ from the prompt's, whose
// KV fails its checksum, or for which the pool can free no block. Making
// room evicts the cache's least useful blocks, which go down to the tiers
// in turn: the pool and its tiers trade places, most recent on top.
func (p *Pool) promote(id int, s *seqPages, prompt []int32, cached int) int {
	t := p.tiers
	bs := p.blockSize
	if cached%bs != 0 || !p.tiersHoldAny() {
		// A match that ends inside a block goes no further: the next
		// block's page is lent, not the sequence's to fill. No design here
		// returns one (every Match is block-aligned); the check keeps a
		// promotion from landing a page off if one did.
		return 0
	}
	hs := p.obs.extend(nil, s.salt, prompt, cached/bs)
	from := make([]int, len(t.tiers))
	added := 0
	for i := cached / bs; i < len(prompt)/bs; i++ {
		hs = p.obs.extend(hs, s.salt, prompt, i+1) // only as far as the tiers go
		found := false
		for ti, tier := range t.tiers {
			if !tier.Has(hs[i]) || t.skip(ti, bs) {
				continue
			}
			start := time.Now()
			blk, ok := tier.Get(hs[i])
			if !ok {
				continue // gone since Has, or corrupt
			}
			if !slices.Equal(blk.Tokens, prompt[i*bs:(i+1)*bs]) || blk.Salted != (s.salt != "") {
				t.stats.Mismatched++
				continue
			}
			if p.reserve(1) != nil {
				return added // nothing left to evict: the rest is computed
			}
			pages, _ := p.alloc.Allocate(nil, 1)
			if err := p.writeTierBlock(pages[0], blk.KV); err != nil {
				p.alloc.Decref(pages[0])
				continue
			}
			s.pages = append(s.pages, pages[0])
			t.promote[ti].add(float64(time.Since(start).Nanoseconds()))
			t.stats.Promoted[ti]++
			from[ti] += bs
			added += bs
			found = true
			break
		}
		if !found {
			break
		}
	}
	if added > 0 {
		t.promoted[id] = from
		if p.tr != nil {
			p.tr.PoolEvent(TraceEvent{Op: TraceGrow, Seq: id, Blocks: s.pages[len(s.pages)-added/bs:]})
		}
	}
	return added
}

// skip applies the promotion rule to tier ti for a block of bs rows.
func (t *tiering) skip(ti, bs int) bool {
	if !t.costRule {
		return false
	}
	if t.promote[ti].n < minSamples || t.prefill.n < minSamples {
		return false // too few to tell a tier's cost from a slow first copy
	}
	copyNs, rowNs := t.promote[ti].median(), t.prefill.median()
	if copyNs <= float64(bs)*rowNs {
		return false
	}
	t.skips[ti]++
	if t.skips[ti]%probeEvery == 0 {
		return false // measure it again
	}
	t.stats.Skipped[ti]++
	return true
}

func (p *Pool) tiersHoldAny() bool {
	for _, tier := range p.tiers.tiers {
		if tier.Stats().Blocks > 0 {
			return true
		}
	}
	return false
}

// writeTierBlock stores kv (Layers × BlockBytes, from demote) into block b.
func (p *Pool) writeTierBlock(b int32, kv []byte) error {
	n := p.BlockBytes()
	if len(kv) != len(p.k)*n {
		return errors.New("kvcache: a tier block of the wrong size")
	}
	for l := range p.k {
		if err := p.WriteBlockBytes(l, b, kv[l*n:(l+1)*n]); err != nil {
			return err
		}
	}
	return nil
}

// tierMatchLen is how many tokens after cached MatchLen's lookahead finds
// in the tiers, with no side effect (no recency, no copy).
func (p *Pool) tierMatchLen(salt string, tokens []int32, cached int) int {
	bs := p.blockSize
	if p.tiers == nil || cached%bs != 0 || !p.tiersHoldAny() {
		return 0
	}
	hs := p.obs.extend(nil, salt, tokens, cached/bs)
	n := 0
	for i := cached / bs; i < len(tokens)/bs; i++ {
		hs = p.obs.extend(hs, salt, tokens, i+1)
		held := false
		for _, tier := range p.tiers.tiers {
			held = held || tier.Has(hs[i])
		}
		if !held {
			break
		}
		n += bs
	}
	return n
}

// FlushTiers copies every block the prefix cache holds into the first
// tier, as a demotion would, without evicting anything, and returns how
// many it copied. With a host-memory tier over a disk, a shutdown then
// drains the first (RAMTier.Drain) so that the disk holds the whole cache
// for the next start. Call it on the engine's goroutine, or once the
// engine has stopped.
func (p *Pool) FlushTiers() int {
	if p.tiers == nil {
		return 0
	}
	n := 0
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	for _, e := range p.obs.entries {
		if !p.tiers.tiers[0].Has(e.hash) {
			p.demote(e, e.blocks[0])
			n++
		}
	}
	return n
}

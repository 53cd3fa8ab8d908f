package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/misses"
)

// work is one sequence's share of a step: n tokens starting at s.computed.
type work struct {
	s *sequence
	n int
}

// plan is what one step computes. Decodes come first so they are never
// starved by long prompts; prefill chunks fill the rest of the budget.
type plan struct {
	decodes  []work
	prefills []work
}

func (p *plan) empty() bool { return len(p.decodes) == 0 && len(p.prefills) == 0 }

// schedule decides the next step: one token for every decoding sequence,
// then chunks of the prompts being prefilled in admission order, then newly
// admitted requests, all within MaxBatchTokens.
func (e *Engine) schedule() plan {
	var p plan
	budget := e.cfg.MaxBatchTokens

	// Decodes. Each needs a slot for its newest token; when the pool is dry
	// the youngest sequence is preempted (its KV dropped, to be recomputed)
	// so that older ones can go on.
	// Oldest first: the victims of preemption are younger, so no sequence
	// already given a slot this step loses it.
	for _, s := range slices.Clone(e.running) {
		if s.phase != decoding { // prefilling, or preempted just now
			continue
		}
		if budget == 0 {
			break
		}
		if !e.growOrPreempt(s, s.computed+1) {
			continue
		}
		p.decodes = append(p.decodes, work{s, 1})
		budget--
	}

	// Prompts already being prefilled continue first: finishing a started
	// prompt frees its blocks sooner than starting a new one.
	for _, s := range e.running {
		if s.phase != prefill || budget == 0 {
			continue
		}
		if n, ok := e.chunk(s, budget); ok {
			p.prefills = append(p.prefills, work{s, n})
			budget -= n
		}
	}

	// Admission, in queue order (first come first served, unless
	// Config.Order sorts the queue first): a request that does not fit
	// blocks those behind it, so a long prompt cannot be starved by a
	// stream of short ones.
	if e.cfg.Order == OrderLongestPrefix && budget > 0 && len(e.running) < e.cfg.MaxRunning {
		e.waiting = admissionOrder(e.waiting, func(s *sequence) int {
			return e.pool.MatchLen(s.req.CacheSalt, s.tokens)
		}, e.stats.Steps, e.cfg.MaxWaitSteps)
	}
	for len(e.waiting) > 0 && budget > 0 && len(e.running) < e.cfg.MaxRunning {
		s := e.waiting[0]
		if !e.admit(s) {
			break
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		if n, ok := e.chunk(s, budget); ok {
			p.prefills = append(p.prefills, work{s, n})
			budget -= n
		}
	}
	return p
}

// admissionOrder sorts waiting for longest-prefix-first admission at
// engine step now. First come the requests that must not wait on their
// prefix: preempted ones (their KV was taken from them), then those that
// have waited maxWait steps or more (the starvation guard; 0: none), each
// group oldest first. Then the rest, longest cached prefix (matched) first,
// ties oldest first. It sorts in place and returns waiting.
func admissionOrder(waiting []*sequence, matched func(*sequence) int, now, maxWait int) []*sequence {
	if len(waiting) < 2 {
		return waiting
	}
	rank := func(s *sequence) int {
		switch {
		case s.preempted > 0:
			return 0
		case maxWait > 0 && now-s.queued >= maxWait:
			return 1
		}
		return 2
	}
	match := make(map[*sequence]int, len(waiting))
	for _, s := range waiting {
		if rank(s) == 2 {
			match[s] = matched(s)
		}
	}
	slices.SortStableFunc(waiting, func(a, b *sequence) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(match[b], match[a]); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	return waiting
}

// chunk returns how many prompt tokens of s to compute with budget tokens
// left. Whole-prompt prefill takes all remaining tokens or waits.
func (e *Engine) chunk(s *sequence, budget int) (int, bool) {
	rest := len(s.tokens) - s.computed
	if e.cfg.ChunkedPrefill {
		return min(rest, budget), true
	}
	return rest, rest <= budget
}

// admit charges s against free KV capacity and, if it fits, opens its page
// table with room for every token it has (prompt, plus output kept across a
// preemption).
func (e *Engine) admit(s *sequence) bool {
	charge := len(s.tokens)
	if e.cfg.Admission == AdmitCostAware {
		charge -= e.pool.MatchLen(s.req.CacheSalt, s.tokens)
	}
	if e.pool.BlocksFor(charge)*e.pool.BlockSize() > e.pool.FreeTokens() {
		return false
	}
	e.blame(s, e.stats.Steps+1) // planning the next step
	cached, err := e.pool.Open(s.key, s.req.CacheSalt, s.tokens)
	if err != nil {
		panic(err) // ids are unique among live requests by Submit's check
	}
	if err := e.pool.Grow(s.key, len(s.tokens)); err != nil {
		e.pool.Release(s.key)
		return false
	}
	// A prompt entirely in the cache still needs its last token run through
	// the model to get the logits of the first output token; its KV is not
	// written again (see forward).
	s.cached = cached
	e.stats.MatchedTokens += cached
	s.computed = min(cached, len(s.tokens)-1)
	s.phase = prefill
	e.admissions++
	s.admitted = e.admissions
	if s.preempted == 0 {
		// Count what the prompt found; a readmission after preemption may
		// find its own earlier KV, which is recompute saved, not a hit.
		s.firstCached = s.cached
		e.verifyAdmit(s)
		if n := len(e.cfg.Tiers); n > 0 {
			s.firstPromoted = make([]int, n)
			copy(s.firstPromoted, e.pool.PromotedTokens(s.key))
		}
		e.stats.QueriedTokens += len(s.tokens)
		e.stats.CachedTokens += s.cached
		if e.misses != nil {
			s.missKeys = misses.Keys(s.tokens, s.req.CacheSalt, e.pool.BlockSize())
			s.misses = e.misses.AdmitKeys(s.missKeys, len(s.tokens), s.cached, 0)
			e.stats.Misses.Add(s.misses)
		}
	} else if e.misses != nil {
		// Everything not lent again is recomputed: tokens the sequence
		// had computed before it lost its KV.
		n := max(0, len(s.tokens)-1-s.cached)
		s.misses.Preempted += n
		e.stats.Misses.Preempted += n
	}
	e.stats.MaxRunning = max(e.stats.MaxRunning, len(e.running)+1)
	return true
}

// growOrPreempt makes s's page table cover n tokens, preempting the
// youngest running sequences until it fits. It reports false when s itself
// was preempted or failed.
func (e *Engine) growOrPreempt(s *sequence, n int) bool {
	e.blame(s, e.stats.Steps+1) // planning the next step
	for {
		err := e.pool.Grow(s.key, n)
		if err == nil {
			// A block shared with a forked sample is copied before the
			// write; take that copy now, while preemption can still make
			// room for it.
			err = e.pool.PrepareWrite(s.key, s.computed, n-s.computed)
		}
		if err == nil {
			return true
		}
		var oob *kvcache.OutOfBlocksError
		if !errors.As(err, &oob) {
			// Not a matter of room (e.g. a write the pool refuses): no
			// preemption can help, and the other requests go on.
			e.fail(s, err)
			return false
		}
		victim := e.youngest()
		if victim == s && len(e.running) == 1 {
			// Alone and still short: the pool can never hold it.
			e.fail(s, fmt.Errorf("engine: request %d needs %d KV blocks, the pool has %d", s.req.ID, e.pool.BlocksFor(n), e.pool.Allocator().Total()))
			return false
		}
		e.preempt(victim)
		if victim == s {
			return false
		}
	}
}

// youngest returns the most recently admitted running sequence.
func (e *Engine) youngest() *sequence {
	y := e.running[0]
	for _, s := range e.running[1:] {
		if s.admitted > y.admitted {
			y = s
		}
	}
	return y
}

// preempt drops s's KV and puts it back at the head of the queue. Its
// tokens (prompt and output so far) are kept and recomputed on readmission;
// batch-invariant kernels make the recomputed KV identical.
func (e *Engine) preempt(s *sequence) {
	e.pool.Release(s.key)
	e.removeRunning(s)
	s.phase = waiting
	s.computed = 0
	s.preempted++
	e.stats.Preemptions++
	e.waiting = append([]*sequence{s}, e.waiting...)
}

func (e *Engine) indexOfRunning(s *sequence) int {
	for i, r := range e.running {
		if r == s {
			return i
		}
	}
	return -1
}

func (e *Engine) removeRunning(s *sequence) {
	if i := e.indexOfRunning(s); i >= 0 {
		e.running = append(e.running[:i], e.running[i+1:]...)
	}
}

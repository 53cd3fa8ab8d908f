package engine

import (
	"time"

	"kvlab/common/model"
	"kvlab/kernels"
)

// batchBuffers are the slices one step assembles, kept across steps so a
// steady-state step allocates nothing for them.
type batchBuffers struct {
	step   model.Step
	owners []*sequence // owners[i] produced step.LogitRows[i]
	host   []float32   // logits copied to the host for sampling
	cons   constraintScratch
}

// run executes plan p and appends its events to out. With chunked prefill,
// decodes and prefill chunks share one forward. Whole-prompt prefill attends
// only to the prompt's own rows, which decodes cannot, so it gets a forward
// of its own.
func (e *Engine) run(p plan, out []Output) []Output {
	if e.cfg.ChunkedPrefill {
		return e.forward(append(p.decodes, p.prefills...), false, out)
	}
	if len(p.prefills) > 0 {
		out = e.forward(p.prefills, true, out)
	}
	if len(p.decodes) > 0 {
		out = e.forward(p.decodes, false, out)
	}
	return out
}

// forward runs the model over ws, advances each sequence and samples where
// a sequence reached the end of its known tokens.
func (e *Engine) forward(ws []work, local bool, out []Output) []Output {
	b := &e.batch
	st := &b.step
	*st = model.Step{Tokens: st.Tokens[:0], Pos: st.Pos[:0], Slots: st.Slots[:0], Seqs: st.Seqs[:0], LogitRows: st.LogitRows[:0], Local: local,
		LocalSlots: st.LocalSlots[:0], LocalSeqs: st.LocalSeqs[:0]}
	b.owners = b.owners[:0]

	prefillRows := 0
	for _, w := range ws {
		s := w.s
		// Rows whose KV the prefix cache already holds (the last token of a
		// prompt found whole in the cache, recomputed for its logits) are
		// not written: their blocks are shared.
		skip := max(0, min(s.cached-s.computed, w.n))
		e.blame(s, e.stats.Steps)
		if err := e.pool.PrepareWrite(s.key, s.computed+skip, w.n-skip); err != nil {
			e.fail(s, err)
			continue
		}
		start := len(st.Tokens)
		st.Tokens = append(st.Tokens, s.tokens[s.computed:s.computed+w.n]...)
		for i := range w.n {
			st.Pos = append(st.Pos, int32(s.computed+i))
		}
		for range skip {
			st.Slots = append(st.Slots, -1)
		}
		st.Slots = e.pool.Slots(st.Slots, s.key, s.computed+skip, w.n-skip)
		st.Seqs = append(st.Seqs, kernels.AttnSeq{QStart: start, QLen: w.n, CtxLen: s.computed + w.n, Pages: e.pool.Pages(s.key)})
		e.addLocal(st, w, skip)
		if s.computed+w.n == len(s.tokens) {
			st.LogitRows = append(st.LogitRows, int32(len(st.Tokens)-1))
			b.owners = append(b.owners, s)
		}
		if s.phase == decoding {
			e.stats.DecodeTokens += w.n
		} else {
			e.stats.PrefillTokens += w.n
			prefillRows += w.n
		}
	}
	if len(st.Tokens) == 0 {
		return out
	}
	start := time.Now()
	logits := e.model.Forward(st, e.pool)

	// Advance before sampling: the KV of every row is now in the pool.
	for _, w := range ws {
		if w.s.phase == prefill || w.s.phase == decoding {
			w.s.computed += w.n
			// No query before computed comes again: local layers give
			// back the blocks before its window (with WindowFree).
			e.pool.Slide(w.s.key, w.s.computed)
		}
		// Offer every finished chunk to the prefix cache, not just the
		// whole prompt: a request that arrives while a long prompt is still
		// being prefilled can already reuse its first blocks.
		if e.cfg.Commit == CommitEveryChunk && w.s.phase == prefill && w.s.computed < len(w.s.tokens) {
			e.pool.Commit(w.s.key, w.s.tokens[:w.s.computed])
		}
	}
	out = e.sample(logits, out)
	if prefillRows > 0 {
		// What a row costs, for the pool's rule on promoting from its
		// tiers (kvcache.Pool.NotePrefill; a no-op without tiers),
		// measured once sampling has read the logits, so that a device
		// that runs the forward asynchronously has finished it.
		e.pool.NotePrefill(len(st.Tokens), time.Since(start))
	}
	return out
}

// sample picks the next token of every sequence that owns a logits row.
func (e *Engine) sample(logits kernels.Tensor, out []Output) []Output {
	b := &e.batch
	if len(b.owners) == 0 {
		return out // only mid-prompt chunks this step
	}
	vocab := logits.Cols()
	var greedy []int32
	if e.allGreedy() {
		greedy = e.model.Backend().ArgmaxRows(logits)
	} else {
		b.host = e.model.Backend().ToHost(logits, growFloats(b.host, logits.Rows()*vocab))
	}
	for i, s := range b.owners {
		var row []float32
		if greedy == nil {
			row = b.host[i*vocab : (i+1)*vocab]
		}
		group := []*sequence{s}
		if s.phase == prefill {
			// Prompt complete: offer its KV to the prefix cache now, so
			// requests arriving during this one's decode can reuse it.
			e.pool.Commit(s.key, s.tokens[:s.computed])
			if s.preempted == 0 && s.missKeys != nil {
				e.misses.Stored(s.missKeys) // the prompt's blocks, hashed at admission
				e.rememberBlocks(s, s.missKeys)
				s.missKeys = nil
			}
			s.phase = decoding
			if !s.forked && s.req.samples() > 1 {
				group = append(group, e.fork(s)...)
			}
		}
		for _, q := range group {
			var tok int32
			var masked []float32
			switch {
			case q.con != nil:
				var err error
				if tok, masked, err = e.sampleConstrained(q, row); err != nil {
					out = e.failSample(q, err, out)
					continue
				}
			case greedy != nil:
				tok = greedy[i]
			default:
				tok = q.req.Sampling.Sample(row, q.generated())
			}
			out = e.emit(q, tok, row, masked, out)
		}
	}
	return out
}

// fork splits the other samples of s's request off s, right after its
// prompt: each sample is a sequence of its own that shares every prompt
// block with s, the partially filled last one included. Their first writes
// land in that shared block, which is where copy-on-write happens
// (kvcache.Pool.PrepareWrite).
func (e *Engine) fork(s *sequence) []*sequence {
	s.forked = true
	var kids []*sequence
	for i := 1; i < s.req.samples(); i++ {
		e.keys++
		e.admissions++
		c := &sequence{
			req: s.req, key: e.keys, sample: i, forked: true,
			tokens: append([]int32(nil), s.tokens...), computed: s.computed, cached: s.cached, firstCached: s.firstCached, firstPromoted: s.firstPromoted, misses: s.misses,
			phase: decoding, admitted: e.admissions,
		}
		if s.con != nil {
			c.con = s.con.Clone() // still at the start: s has generated nothing
		}
		c.req.Sampling.Seed += uint64(i)
		if e.tr != nil {
			e.tr.Sequence(c.key, s.req.ID, i)
		}
		if err := e.pool.Fork(s.key, c.key); err != nil {
			panic(err) // s is open and c.key is fresh
		}
		e.running = append(e.running, c)
		e.live[s.req.ID]++
		e.nlive++
		e.stats.Forks++
		kids = append(kids, c)
	}
	e.stats.MaxRunning = max(e.stats.MaxRunning, len(e.running))
	return kids
}

// emit appends tok to s, reports it, and retires s if it is done. masked is
// the row a constrained sample drew from (nil for others): post-sampling
// probabilities are its, after the constraint's mask.
func (e *Engine) emit(s *sequence, tok int32, row, masked []float32, out []Output) []Output {
	o := Output{ID: s.req.ID, Sample: s.sample, Token: tok, Index: s.generated(), Cached: s.firstCached, Promoted: s.firstPromoted, Misses: s.misses}
	s.tokens = append(s.tokens, tok)
	if s.req.KeepLogits { // allGreedy made sure row is on the host (for TopProbs too)
		o.Logits = append([]float32(nil), row...)
	}
	switch {
	case s.req.TopProbs > 0 && s.req.PostSamplingProbs && masked != nil:
		o.Prob, o.Top = unbiased(s.req.Sampling).SampledProbs(masked, tok, s.req.TopProbs)
	case s.req.TopProbs > 0 && s.req.PostSamplingProbs:
		o.Prob, o.Top = s.req.Sampling.SampledProbs(row, tok, s.req.TopProbs)
	case s.req.TopProbs > 0:
		o.Prob, o.Top = topProbs(row, tok, s.req.TopProbs)
	}
	switch {
	case (!s.req.IgnoreEOS || s.con != nil) && e.eos[tok]: // a constrained sample draws EOS only to end
		o.Done, o.Reason = true, "eos"
	case s.generated() >= s.req.MaxTokens || len(s.tokens) >= e.context:
		o.Done, o.Reason = true, "length"
	}
	if o.Done {
		e.finish(s)
	}
	return append(out, o)
}

// allGreedy reports whether every row of this step can be sampled on the
// backend with an argmax (no logits copied to the host).
func (e *Engine) allGreedy() bool {
	for _, s := range e.batch.owners {
		if !s.req.Sampling.Greedy() || s.req.KeepLogits || s.req.TopProbs > 0 || s.con != nil {
			return false
		}
	}
	return true
}

func growFloats(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

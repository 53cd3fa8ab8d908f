// Package engine is the serving loop: it queues requests, admits them
// against free KV capacity, schedules decodes and prefill chunks under a
// per-step token budget (continuous batching with chunked prefill), runs one
// model forward per step and samples the next tokens.
//
// A step, in order (Engine.Step):
//
//  1. schedule: one token for each decoding sequence (preempting the
//     youngest when the KV pool runs dry), then chunks of prompts being
//     prefilled, then admission of waiting requests;
//  2. run: assemble the flat batch and run the forward (runner.go);
//  3. sample: every sequence whose prompt is complete, and every decode,
//     gets its next token; finished requests return their blocks.
package engine

import (
	"fmt"
	"slices"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/misses"
	"kvlab/common/model"
)

// Engine serves requests on one model. It is not safe for concurrent use:
// one goroutine submits and steps.
type Engine struct {
	cfg     Config
	model   *model.Model
	pool    *kvcache.Pool
	context int // effective context limit in tokens
	eos     map[int32]bool

	waiting []*sequence // FIFO; preempted sequences go back to the front
	running []*sequence // admitted, in admission order
	live    map[int]int // unfinished sequences per request id
	nlive   int         // unfinished sequences in all
	// idleSteps counts steps in a row that ran and reported nothing while
	// requests were live (watchStall).
	idleSteps int
	keys      int          // last sequence key handed out
	pending   []Output     // events produced outside a forward (failures)
	batch     batchBuffers // reused step assembly
	stats     Stats
	misses    *misses.Ledger // why computed prompt tokens were not cached
	// missBlocks maps a cached prompt block to its ledger key, and cause
	// says who is allocating now, for the ledger's evictions (missevict.go).
	missBlocks map[int32]uint64
	cause      missCause
	// admissions numbers admissions so preemption can find the youngest.
	admissions int
	tr         Tracer    // nil: no trace (SetTracer)
	verify     *verifier // nil unless Config.VerifyHits (verify.go)
}

// Stats counts what the engine did. Tokens are counted once per forward row.
type Stats struct {
	Steps         int
	PrefillTokens int // prompt (and recompute) tokens run through the model
	DecodeTokens  int // decode rows run through the model
	QueriedTokens int // prompt tokens looked up in the prefix cache at first admission
	CachedTokens  int // prompt tokens whose KV came from the prefix cache at first admission
	// MatchedTokens counts every token the prefix cache lent at any
	// admission, readmissions after preemption included: the cache's own
	// hit count. It is at least CachedTokens; the difference is recompute
	// that preemption would have cost and the cache saved.
	MatchedTokens int
	Preemptions   int
	MaxRunning    int // most sequences admitted at once
	PeakBlocks    int // most KV blocks held at once
	Finished      int
	Failed        int
	Cancelled     int // requests ended by Cancel
	Forks         int // sample sequences split off a prompt
	// With WindowFree, the most local-layer blocks held at once (the
	// local layers' storage; PeakBlocks counts the global layers').
	PeakLocalBlocks int
	// Misses sums the requests' Output.Misses: why each computed prompt
	// token was not reused.
	Misses misses.Reasons
	// EndBlocks and EndLocalBlocks sum, over finished sequences, the blocks
	// each held at its end: its page table (blocks lent by a prefix cache
	// included) and, with WindowFree, its local entries not given back.
	EndBlocks, EndLocalBlocks int
	// With VerifyHits: hits recomputed and compared (verify.go), those
	// that differed, and those skipped because the verifier was busy.
	VerifyChecked, VerifyFailed, VerifySkipped int
}

// New builds an engine for m with a fresh KV pool.
func New(m *model.Model, cfg Config) (*Engine, error) {
	if err := cfg.Validate(m.Config.MaxPositionEmbeddings); err != nil {
		return nil, err
	}
	return build(m, cfg)
}

// build is New for a config Validate accepted (tests also build ones it
// refuses, to show why).
func build(m *model.Model, cfg Config) (*Engine, error) {
	mc := m.Config
	cfg.MaxRunning = cfg.RunningSlots()
	pool, err := kvcache.NewPool(m.Backend(), kvcache.Config{
		Layers:    mc.NumHiddenLayers,
		KVDim:     mc.NumKeyValueHeads * mc.HeadDim,
		Blocks:    cfg.NumBlocks,
		BlockSize: cfg.BlockSize,
		DType:     cfg.KVCacheDType,
		NewCache:  cfg.PrefixCache,
		// With WindowFree, the local layers' storage and their windows.
		Windows:     windowsOf(&mc, cfg.WindowFree),
		LocalBlocks: localBlocks(cfg),
		TailBlocks:  cfg.TailBlocks,
	})
	if err != nil {
		return nil, err
	}
	if len(cfg.Tiers) > 0 {
		if err := pool.AttachTiers(cfg.Tiers...); err != nil {
			pool.Close()
			return nil, err
		}
		pool.SetTierCostRule(!cfg.TiersAlwaysPromote)
	}
	// Without a prefix cache nothing could be reused, so no token missed:
	// the ledger stays nil. It remembers a bounded number of blocks; past
	// the cap misses count as cold (misses.Ledger).
	var ledger *misses.Ledger
	if cfg.PrefixCache != nil {
		ledger = misses.New(cfg.BlockSize, 1<<16)
	}
	e := &Engine{
		misses: ledger,
		cfg:    cfg,
		model:  m,
		pool:   pool,
		// One sequence can never hold more than the whole pool: a context
		// the pool cannot hold would let a request run, preempt the others
		// and fail after its tokens were sent.
		context: min(cfg.ContextLimit(mc.MaxPositionEmbeddings), cfg.NumBlocks*cfg.BlockSize),
		eos:     make(map[int32]bool),
		live:    make(map[int]int),
	}
	for _, id := range mc.EOSTokenIDs {
		e.eos[id] = true
	}
	if ledger != nil {
		e.watchEvictions()
	}
	if cfg.Trace != nil {
		e.SetTracer(cfg.Trace)
	}
	e.verify = newVerifier(e)
	return e, nil
}

// Close frees the KV pool.
func (e *Engine) Close() {
	e.closeVerifier()
	e.pool.Close()
}

// Pool exposes the KV pool (for audits, metrics and tests).
func (e *Engine) Pool() *kvcache.Pool { return e.pool }

// Stats returns the counters so far.
func (e *Engine) Stats() Stats { return e.stats }

// Submit validates r and queues it. A bad request returns an error and
// leaves the engine and every other request untouched.
func (e *Engine) Submit(r Request) error {
	if err := e.check(r); err != nil {
		return fmt.Errorf("engine: request %d: %w", r.ID, err)
	}
	e.keys++
	s := &sequence{req: r, key: e.keys, tokens: append([]int32(nil), r.Prompt...), phase: waiting, queued: e.stats.Steps, con: r.Constraint}
	e.live[r.ID]++
	e.nlive++
	e.waiting = append(e.waiting, s)
	if e.tr != nil {
		e.tr.Sequence(s.key, r.ID, 0)
	}
	return nil
}

func (e *Engine) check(r Request) error {
	if _, dup := e.live[r.ID]; dup {
		return fmt.Errorf("id %d is already in use", r.ID)
	}
	if len(r.Prompt) == 0 {
		return fmt.Errorf("empty prompt")
	}
	if len(r.Prompt) >= e.context {
		return fmt.Errorf("prompt of %d tokens leaves no room to generate within the context of %d tokens%s", len(r.Prompt), e.context, e.contextWhy())
	}
	if la := e.pool.LocalAllocator(); la != nil {
		// Admission gives the local layers a block for every token the
		// sequence has, and a preempted sequence comes back with its
		// output: the longest it can grow must fit, or it could wait
		// forever.
		n := min(len(r.Prompt)+max(r.MaxTokens, 1), e.context)
		if blocks := e.pool.BlocksFor(n); blocks > la.Total() {
			return fmt.Errorf("prompt and output of up to %d tokens need %d local-layer KV blocks when admitted again after a preemption, their storage has %d", n, blocks, la.Total())
		}
	}
	if err := e.model.CheckTokens(r.Prompt); err != nil {
		return err
	}
	if err := r.Sampling.CheckVocab(e.model.Config.VocabSize); err != nil {
		return err
	}
	if r.MaxTokens <= 0 {
		return fmt.Errorf("max tokens must be positive, have %d", r.MaxTokens)
	}
	if r.TopProbs < 0 || r.TopProbs > MaxTopProbs {
		return fmt.Errorf("top probabilities must be in [0, %d], have %d", MaxTopProbs, r.TopProbs)
	}
	if r.N < 0 || r.N > MaxSamples {
		return fmt.Errorf("samples must be in [1, %d], have %d", MaxSamples, r.N)
	}
	return r.Sampling.Validate()
}

// Busy reports whether any submitted request is unfinished.
func (e *Engine) Busy() bool { return e.nlive > 0 || len(e.pending) > 0 || e.verifyBusy() }

// MaxSamples bounds Request.N.
const MaxSamples = 64

// Step runs one iteration and returns the events it produced.
func (e *Engine) Step() []Output {
	e.verifyDrain()
	p := e.schedule()
	// Blocks peak here: every row of the step has its slot, and nothing
	// has finished yet.
	e.stats.PeakBlocks = max(e.stats.PeakBlocks, e.pool.UsedBlocks())
	e.stats.PeakLocalBlocks = max(e.stats.PeakLocalBlocks, e.pool.UsedLocalBlocks())
	out := e.pending
	e.pending = nil
	if e.tr != nil {
		e.tracePlan(p, e.stats.Steps+1)
	}
	if !p.empty() {
		e.stats.Steps++
		out = e.run(p, out)
	}
	e.watchStall(p.empty() && len(out) == 0)
	if e.cfg.Audit {
		if err := e.pool.Audit().Err(); err != nil {
			panic(fmt.Sprintf("engine: after step %d: %v", e.stats.Steps, err))
		}
	}
	if e.tr != nil {
		e.tr.StepDone(e.pool)
	}
	return out
}

// MaxIdleSteps is how many steps in a row a busy engine may run nothing
// and report nothing before Step declares a deadlock: a request that can
// never be scheduled would otherwise keep every loop that steps the engine
// (a server's, a test's, RunAll) spinning forever.
const MaxIdleSteps = 1000

// watchStall counts steps in a row that made no progress (idle) while
// requests are live, and past MaxIdleSteps fails every live request with
// an error that names the deadlock, so the loops stepping the engine end
// at once instead of spinning.
func (e *Engine) watchStall(idle bool) {
	if !idle || !e.Busy() {
		e.idleSteps = 0
		return
	}
	e.idleSteps++
	if e.idleSteps < MaxIdleSteps {
		return
	}
	e.idleSteps = 0
	err := fmt.Errorf("engine: no progress in %d steps with %d sequences waiting and %d running: a scheduling deadlock", MaxIdleSteps, len(e.waiting), len(e.running))
	waiting := e.waiting
	e.waiting = nil
	for _, s := range append(slices.Clone(e.running), waiting...) {
		e.fail(s, err)
	}
}

// finish retires s: its last KV is offered to the prefix cache (so a later
// turn of the conversation can reuse prompt and output) and its blocks go
// back to the pool.
func (e *Engine) finish(s *sequence) {
	global, local := e.pool.SeqBlocks(s.key)
	e.stats.EndBlocks += global
	e.stats.EndLocalBlocks += local
	e.pool.Commit(s.key, s.tokens[:s.computed])
	e.storeCommitted(s)
	e.retire(s)
	e.stats.Finished++
}

// fail retires s with an error event.
func (e *Engine) fail(s *sequence, err error) {
	e.retire(s)
	e.stats.Failed++
	e.pending = e.ended(e.pending, s, "error", err)
}

// ended appends the last event of each sample s stands for: itself, and,
// before the fork, the samples that would have been split off it. A
// stream waiting for every sample's Done event is then never left open.
func (e *Engine) ended(out []Output, s *sequence, reason string, err error) []Output {
	samples := []int{s.sample}
	if !s.forked {
		for i := 1; i < s.req.samples(); i++ {
			samples = append(samples, i)
		}
	}
	for _, i := range samples {
		out = append(out, Output{ID: s.req.ID, Sample: i, Index: s.generated(), Done: true, Reason: reason, Err: err, Cached: s.firstCached, Promoted: s.firstPromoted, Misses: s.misses})
	}
	return out
}

// Cancel ends request id wherever it is: waiting, prefilling or decoding.
// The KV it already computed is offered to the prefix cache (a client that
// gave up may well send the same prompt again), its blocks go back to the
// pool, and the next Step reports a last event with Reason "cancelled" for
// each of its unfinished samples. It reports whether id was live. Like
// every Engine method, call it from the goroutine that steps the engine,
// between steps.
func (e *Engine) Cancel(id int) bool {
	if e.live[id] == 0 {
		return false
	}
	var victims []*sequence
	for _, s := range e.waiting {
		if s.req.ID == id {
			victims = append(victims, s)
		}
	}
	for _, s := range e.running {
		if s.req.ID == id {
			victims = append(victims, s)
		}
	}
	for _, s := range victims {
		if s.phase == waiting {
			e.waiting = slices.DeleteFunc(e.waiting, func(w *sequence) bool { return w == s })
		} else {
			e.pool.Commit(s.key, s.tokens[:s.computed])
			e.storeCommitted(s)
		}
		e.retire(s)
		e.pending = e.ended(e.pending, s, "cancelled", nil)
	}
	e.stats.Cancelled++
	return true
}

// ContextLimit returns the most tokens (prompt plus output) a sequence may
// hold: the smallest of the model's max_position_embeddings, MaxContext
// and the KV pool's capacity (NumBlocks × BlockSize), so that a sequence
// at the limit fits the pool when it runs alone. A generation that reaches
// it ends with Reason "length".
func (e *Engine) ContextLimit() int { return e.context }

// contextWhy explains a context limit the pool sets, for error messages.
func (e *Engine) contextWhy() string {
	if e.context == e.cfg.NumBlocks*e.cfg.BlockSize && e.context < e.cfg.ContextLimit(e.model.Config.MaxPositionEmbeddings) {
		return fmt.Sprintf(", what the KV pool's %d blocks of %d tokens hold", e.cfg.NumBlocks, e.cfg.BlockSize)
	}
	return ""
}

// Waiting returns the number of queued sequences (new, or preempted and
// waiting to be readmitted).
func (e *Engine) Waiting() int { return len(e.waiting) }

// Running returns the number of admitted sequences.
func (e *Engine) Running() int { return len(e.running) }

func (e *Engine) retire(s *sequence) {
	e.pool.Release(s.key)
	e.removeRunning(s)
	s.phase = finished
	e.nlive--
	if e.live[s.req.ID]--; e.live[s.req.ID] == 0 {
		delete(e.live, s.req.ID)
	}
}

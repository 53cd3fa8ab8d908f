package engine

import "kvlab/common/kvcache"

// Tracer is told what every step does: the plan, then (through the pool's
// kvcache.Tracer events) each match, allocation, commit, eviction, copy and
// release, then the end of the step. An engine without one (the default)
// pays a nil check per hook. Set it with Config.Trace or SetTracer.
type Tracer interface {
	kvcache.Tracer
	// Sequence names a pool sequence: sample sample of request request.
	// It is called when the sequence is submitted or forked.
	Sequence(seq, request, sample int)
	// Plan is called once a step is scheduled (admissions' matches have
	// happened), before its forward. step counts from 1; an empty plan
	// has step 0.
	Plan(step int, work []TraceWork)
	// StepDone is called at the end of every Step with the pool, whose
	// structure the tracer may dump (kvcache.Pool.Dump).
	StepDone(pool *kvcache.Pool)
}

// TraceWork is one sequence's share of a step: N tokens from position From,
// a decode or a prefill chunk.
type TraceWork struct {
	Seq, From, N int
	Decode       bool
}

// SetTracer sends the engine's steps and its pool's operations to t; nil
// turns tracing off.
func (e *Engine) SetTracer(t Tracer) {
	e.tr = t
	if t == nil {
		e.pool.SetTracer(nil)
		return
	}
	e.pool.SetTracer(t)
}

// tracePlan reports plan p, which will be step number step.
func (e *Engine) tracePlan(p plan, step int) {
	ws := make([]TraceWork, 0, len(p.decodes)+len(p.prefills))
	for _, w := range p.decodes {
		ws = append(ws, TraceWork{Seq: w.s.key, From: w.s.computed, N: w.n, Decode: true})
	}
	for _, w := range p.prefills {
		ws = append(ws, TraceWork{Seq: w.s.key, From: w.s.computed, N: w.n})
	}
	e.tr.Plan(step, ws)
}

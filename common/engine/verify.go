package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/kernels"
)

// Hit verification (Config.VerifyHits). The project's claim is that a
// prefix-cache hit is bit-identical to computing it. The verifier checks
// that claim while serving: for one in N requests whose admission found at
// least one whole cached block, the engine copies, at admission, the bytes
// of the matched blocks (every layer, in the pool's dtype) and the matched
// tokens, and hands them to a goroutine of its own that computes the KV of
// those tokens from scratch and compares.
//
// What is compared, and why it is exact. The recompute goes the way the
// engine computes an uncached prompt: a paged forward (not Local) from
// position 0, in chunks of MaxBatchTokens (which also bounds the clone's
// scratch), into a private pool of the same dtype and block size, so every
// value is rounded where the engine rounds it (WriteKV, before attention
// reads it back). Batch-invariant kernels make a row's value independent
// of how the rows are cut into steps, which is what TestTieredCacheIsExact
// and the other cached-versus-uncached tests rely on. (A Local forward
// would agree too: WriteKV overwrites a 16-bit pool's k and v rows with
// their rounded values, so AttendLocal sees what Attend sees; the
// verifier takes the paged path because it is the one the cached blocks
// were written by.) TestVerifyHitsFindsCleanBlocksClean proves it on
// clean blocks: no failure on any design, KV dtype or chunk size. Then:
//
//   - the KV of each matched block, every layer, is compared byte for
//     byte with the copy taken at admission (AppendBlock: what the pool
//     stores, in its dtype);
//   - the next-token logits at the last matched position are compared bit
//     for bit: the recompute's, against a one-token forward of that last
//     matched token over the cached copy (loaded into the private pool,
//     the row itself not written, as the engine runs a prompt found whole
//     in the cache).
//
// Cost: one forward of the matched prefix per N hits, plus a copy of its KV
// to the host at admission. It runs off the engine's goroutine, through a
// clone of the model (model.Clone: shared weights, its own scratch), one
// job at a time, but on the same cores. The queue is bounded
// (verifyQueue): when it is full the check is skipped and counted
// (VerifySkipped), never waited for.
//
// On a mismatch the engine counts it (VerifyFailed), writes a line to
// Config.VerifyLog, preempts every running sequence whose tokens begin
// with the bad block's prefix under the same salt (they may read the bad
// block; they recompute it), and makes the cache forget that prefix and
// everything below it (kvcache.Pool.Forget), so it is never lent again.

// verifyQueue bounds the jobs waiting for the verifier.
const verifyQueue = 2

// verifyJob is one hit to check, copied on the engine's goroutine.
type verifyJob struct {
	id     int      // request id
	salt   string   // the request's cache salt
	tokens []int32  // the matched tokens, whole blocks
	pages  []int32  // pool blocks that held them, for the log
	kv     [][]byte // kv[i]: block i's AppendBlock bytes, layer after layer
}

// verifyResult is what the verifier found. block < 0: the KV agreed.
type verifyResult struct {
	job       *verifyJob
	block     int     // first mismatching block, or -1
	layer     int     // its first mismatching layer
	maxDiff   float64 // largest |cached − recomputed| in that block and layer
	logitDiff float64 // largest difference of the next-token logits (0: equal)
	logitsBad bool
	err       error
}

func (r *verifyResult) failed() bool { return r.err == nil && (r.block >= 0 || r.logitsBad) }

// verifier is the goroutine that recomputes hits.
type verifier struct {
	every   int
	hits    int // whole-block hits seen at first admission
	jobs    chan *verifyJob
	results chan verifyResult // room for every job out, so the verifier never waits
	done    chan struct{}     // closed when the verifier goroutine has ended
	busy    int               // jobs handed over whose result has not been drained
	m       *model.Model
	cfg     kvcache.Config
	chunk   int
}

// newVerifier starts the verifier for e when VerifyHits asks for one.
func newVerifier(e *Engine) *verifier {
	if e.cfg.VerifyHits <= 0 {
		return nil
	}
	mc := e.model.Config
	v := &verifier{
		every:   e.cfg.VerifyHits,
		jobs:    make(chan *verifyJob, verifyQueue),
		results: make(chan verifyResult, verifyQueue+1),
		done:    make(chan struct{}),
		m:       e.model.Clone(),
		cfg: kvcache.Config{Layers: mc.NumHiddenLayers, KVDim: mc.NumKeyValueHeads * mc.HeadDim,
			BlockSize: e.cfg.BlockSize, DType: e.cfg.KVCacheDType},
		chunk: e.cfg.MaxBatchTokens,
	}
	go v.loop()
	return v
}

func (v *verifier) loop() {
	defer close(v.done)
	defer v.m.CloseScratch()
	for j := range v.jobs {
		v.results <- v.check(j)
	}
}

// verifyAdmit hands s's hit to the verifier if it is the N-th: called by
// admit, on the engine's goroutine, right after the pool lent the blocks.
func (e *Engine) verifyAdmit(s *sequence) {
	v := e.verify
	bs := e.pool.BlockSize()
	nb := s.cached / bs
	if v == nil || s.preempted > 0 || nb == 0 {
		return
	}
	v.hits++
	if v.hits%v.every != 0 {
		return
	}
	j := &verifyJob{id: s.req.ID, salt: s.req.CacheSalt, tokens: append([]int32(nil), s.tokens[:nb*bs]...),
		pages: append([]int32(nil), e.pool.Pages(s.key)[:nb]...)}
	scratch := make([]float32, 2*bs*e.pool.KVDim())
	for _, b := range j.pages {
		var raw []byte
		for l := range e.pool.Layers() {
			raw = e.pool.AppendBlock(raw, l, b, scratch)
		}
		j.kv = append(j.kv, raw)
	}
	select {
	case v.jobs <- j:
		v.busy++
	default:
		e.stats.VerifySkipped++
	}
}

// verifyBusy reports whether a check handed over has not come back yet.
func (e *Engine) verifyBusy() bool { return e.verify != nil && e.verify.busy > 0 }

// verifyDrain takes in every result the verifier has ready, at the start
// of a step, without waiting; only an engine with nothing else to do waits
// a little (a serving loop that steps it while a check is out then does
// not spin).
func (e *Engine) verifyDrain() {
	v := e.verify
	if v == nil || v.busy == 0 {
		return
	}
	var wait <-chan time.Time
	if e.nlive == 0 && len(e.pending) == 0 {
		wait = time.After(5 * time.Millisecond)
	}
	for v.busy > 0 {
		var r verifyResult
		if wait == nil {
			select {
			case r = <-v.results:
			default:
				return
			}
		} else {
			select {
			case r = <-v.results:
				wait = nil
			case <-wait:
				return
			}
		}
		v.busy--
		e.verifyDone(&r)
	}
}

// verifyDone records one result and acts on a mismatch.
func (e *Engine) verifyDone(r *verifyResult) {
	if r.err != nil {
		e.verifyLog("engine: verify: request %d: the check could not run: %v\n", r.job.id, r.err)
		return
	}
	e.stats.VerifyChecked++
	if !r.failed() {
		return
	}
	e.stats.VerifyFailed++
	salted := "unsalted"
	if r.job.salt != "" {
		salted = "salted"
	}
	if r.block < 0 {
		e.verifyLog("engine: verify: request %d (%s): every cached block matches a recompute but the next-token logits differ by up to %g\n", r.job.id, salted, r.logitDiff)
		return
	}
	bs := e.pool.BlockSize()
	prefix := r.job.tokens[:(r.block+1)*bs]
	preempted := 0
	for _, s := range append([]*sequence(nil), e.running...) {
		if s.req.CacheSalt == r.job.salt && len(s.tokens) >= len(prefix) && slices.Equal(s.tokens[:len(prefix)], prefix) {
			e.preempt(s)
			preempted++
		}
	}
	dropped := e.pool.Forget(r.job.salt, prefix)
	e.verifyLog("engine: verify: request %d (%s): cached block %d (pool block %d) layer %d differs from a recompute by up to %g (next-token logits by up to %g); preempted %d sequences, forgot %d cached blocks\n",
		r.job.id, salted, r.block, r.job.pages[r.block], r.layer, r.maxDiff, r.logitDiff, preempted, dropped)
}

func (e *Engine) verifyLog(format string, args ...any) {
	if e.cfg.VerifyLog != nil {
		fmt.Fprintf(e.cfg.VerifyLog, format, args...)
	}
}

// closeVerifier stops the verifier goroutine and waits for it: queued
// jobs are dropped, the one running finishes (at most one forward of a
// prefix), so nothing still reads the weights when the caller closes the
// model.
func (e *Engine) closeVerifier() {
	if v := e.verify; v != nil {
		for len(v.jobs) > 0 {
			select {
			case <-v.jobs:
			default:
			}
		}
		close(e.verify.jobs)
		<-e.verify.done
		e.verify = nil
	}
}

// check recomputes j's tokens from scratch and compares (see the top of
// this file). It runs on the verifier's goroutine and touches nothing of
// the engine's.
func (v *verifier) check(j *verifyJob) (r verifyResult) {
	r = verifyResult{job: j, block: -1}
	defer func() {
		if p := recover(); p != nil {
			r.err = fmt.Errorf("%v", p)
		}
	}()
	bs, nb := v.cfg.BlockSize, len(j.kv)
	cfg := v.cfg
	cfg.Blocks = 2 * nb // [0, nb): the recompute; [nb, 2nb): the cached copy
	pool, err := kvcache.NewPool(v.m.Backend(), cfg)
	if err != nil {
		r.err = err
		return r
	}
	defer pool.Close()
	fresh, cached := make([]int32, nb), make([]int32, nb)
	for i := range nb {
		fresh[i], cached[i] = int32(i), int32(nb+i)
	}
	m := len(j.tokens)
	var want []float32
	for done := 0; done < m; {
		n := min(v.chunk, m-done)
		st := &model.Step{Seqs: []kernels.AttnSeq{{QLen: n, CtxLen: done + n, Pages: fresh}}}
		for p := done; p < done+n; p++ {
			st.Tokens = append(st.Tokens, j.tokens[p])
			st.Pos = append(st.Pos, int32(p))
			st.Slots = append(st.Slots, fresh[p/bs]*int32(bs)+int32(p%bs))
		}
		if done+n == m {
			st.LogitRows = []int32{int32(n - 1)}
		}
		logits := v.m.Forward(st, pool)
		if logits != nil {
			want = v.m.Backend().ToHost(logits, make([]float32, logits.Cols()))
		}
		done += n
	}
	scratch := make([]float32, 2*bs*pool.KVDim())
	per := pool.BlockBytes()
	for i := range nb {
		for l := range cfg.Layers {
			got := pool.AppendBlock(nil, l, fresh[i], scratch)
			had := j.kv[i][l*per : (l+1)*per]
			if r.block < 0 && !bytes.Equal(got, had) {
				r.block, r.layer, r.maxDiff = i, l, maxAbsDiff(got, had, cfg.DType)
			}
			if err := pool.WriteBlockBytes(l, cached[i], had); err != nil {
				r.err = err
				return r
			}
		}
	}
	st := &model.Step{Tokens: []int32{j.tokens[m-1]}, Pos: []int32{int32(m - 1)}, Slots: []int32{-1},
		Seqs: []kernels.AttnSeq{{QLen: 1, CtxLen: m, Pages: cached}}, LogitRows: []int32{0}}
	logits := v.m.Forward(st, pool)
	got := v.m.Backend().ToHost(logits, make([]float32, logits.Cols()))
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			r.logitsBad = true
			r.logitDiff = max(r.logitDiff, math.Abs(float64(got[i])-float64(want[i])))
		}
	}
	return r
}

// maxAbsDiff returns the largest difference between two AppendBlock byte
// strings of dtype dt, as values (NaN or Inf differences count as +Inf).
func maxAbsDiff(a, b []byte, dt kernels.KVDType) float64 {
	w := dt.Bytes()
	d := 0.0
	for i := 0; i+w <= len(a); i += w {
		x, y := decodeKV(a[i:], dt), decodeKV(b[i:], dt)
		diff := math.Abs(float64(x) - float64(y))
		if math.IsNaN(diff) {
			diff = math.Inf(1)
		}
		d = max(d, diff)
	}
	return d
}

func decodeKV(b []byte, dt kernels.KVDType) float32 {
	switch dt {
	case kernels.KVBF16:
		return kernels.BF16ToF32(binary.LittleEndian.Uint16(b))
	case kernels.KVF16:
		return kernels.F16ToF32(binary.LittleEndian.Uint16(b))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// verifyHitsSeen returns the hits counted so far (0 without a verifier).
func (e *Engine) verifyHitsSeen() int {
	if e.verify == nil {
		return 0
	}
	return e.verify.hits
}

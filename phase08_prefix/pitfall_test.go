package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/workload"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// Each TestPitfall reproduces one entry of PITFALLS.md: it runs the buggy
// behaviour (a small port of it, or a wrapper that injects it through the
// seam), asserts the symptom, and shows the real code does not have it.

// addRows appends sequence key's tokens [start, start+n) to st the way the
// engine's forward assembles a step: rows whose KV the cache already holds
// get slot -1 (no write), and the last prompt row asks for logits.
func addRows(st *model.Step, p *kvcache.Pool, key int, prompt []int32, cached, start, n int) {
	skip := max(0, min(cached-start, n))
	first := len(st.Tokens)
	st.Tokens = append(st.Tokens, prompt[start:start+n]...)
	for i := range n {
		st.Pos = append(st.Pos, int32(start+i))
	}
	for range skip {
		st.Slots = append(st.Slots, -1)
	}
	st.Slots = p.Slots(st.Slots, key, start+skip, n-skip)
	st.Seqs = append(st.Seqs, kernels.AttnSeq{QStart: first, QLen: n, CtxLen: start + n, Pages: p.Pages(key)})
	if start+n == len(prompt) {
		st.LogitRows = append(st.LogitRows, int32(len(st.Tokens)-1))
	}
}

// logitRows runs st and copies out its logits, one slice per row.
func logitRows(m *model.Model, st *model.Step, kv model.KV) [][]float32 {
	t := m.Forward(st, kv)
	data, vocab := cpu.Data(t), t.Cols()
	var rows [][]float32
	for i := range t.Rows() {
		rows = append(rows, append([]float32(nil), data[i*vocab:(i+1)*vocab]...))
	}
	return rows
}

// gap is the largest absolute difference between two logit rows.
func gap(a, b []float32) float64 {
	var g float64
	for i := range min(len(a), len(b)) {
		g = math.Max(g, math.Abs(float64(a[i])-float64(b[i])))
	}
	return g
}

// resultGap is the largest logit difference between have and want, and how
// many requests of want generated other tokens (or are missing from have).
func resultGap(have, want map[int]*result) (g float64, wrong int) {
	for id, w := range want {
		h := have[id]
		if h == nil || !slices.Equal(h.tokens, w.tokens) {
			wrong++
		}
		if h == nil {
			continue
		}
		for i := range min(len(h.logits), len(w.logits)) {
			g = math.Max(g, gap(h.logits[i], w.logits[i]))
		}
	}
	return g, wrong
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// open starts sequence key in the engine's pool for prompt (the engine is
// idle) and returns the tokens it found cached.
func open(t *testing.T, e *engine.Engine, key int, prompt []int32) int {
	t.Helper()
	cached, err := e.Pool().Open(key, "", prompt)
	require.NoError(t, err)
	require.NoError(t, e.Pool().Grow(key, len(prompt)))
	t.Cleanup(func() { e.Pool().Release(key) })
	return cached
}

// TestPitfallFullHitZeroLengthChunk is the PITFALLS.md entry "A prompt
// found whole in the cache leaves a zero-length chunk": such a prompt
// leaves nothing to prefill. Starting it at the matched length gives a
// zero-length chunk: alone, an empty forward; in a batch, its "last row" is
// another sequence's.
func TestPitfallFullHitZeroLengthChunk(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(11, 12))
	p, q := tokens(rng, 16), tokens(rng, 5) // p is block-aligned
	want := run(t, m, baseline(config()), request(1, p, 1), request(2, q, 1))

	e := newEngine(t, m, config())
	serve(t, e, 100, request(1, p, 1)) // p's four blocks are now cached
	const pk, qk = 1001, 1002
	cached := open(t, e, pk, p)
	require.Equal(t, 16, cached)
	open(t, e, qk, q)
	var bugPanic string
	var bugOther bool
	var bugGap, fixGap float64

	for _, tt := range []struct {
		name  string
		start int // where p's prefill starts
	}{
		{"naive: start at the matched length", cached},
		{"engine: recompute the last token", min(cached, len(p)-1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			alone := &model.Step{}
			addRows(alone, e.Pool(), pk, p, cached, tt.start, len(p)-tt.start)
			batch := &model.Step{}
			addRows(batch, e.Pool(), qk, q, 0, 0, len(q))
			addRows(batch, e.Pool(), pk, p, cached, tt.start, len(p)-tt.start)
			if tt.start == len(p) {
				func() {
					defer func() { bugPanic = fmt.Sprint(recover()) }()
					m.Forward(alone, e.Pool())
				}()
				require.NotEqual(t, "<nil>", bugPanic, "a step with no tokens")
				rows := logitRows(m, batch, e.Pool())
				bugOther, bugGap = sameBits(rows[1], want[2].logits[0]), gap(rows[1], want[1].logits[0])
				if !sameBits(rows[1], want[2].logits[0]) || sameBits(rows[1], want[1].logits[0]) {
					t.Fatal("in a batch, the fully cached prompt should have got the other sequence's logits")
				}
				return
			}
			if rows := logitRows(m, alone, e.Pool()); !sameBits(rows[0], want[1].logits[0]) {
				t.Fatal("alone: the one-token pass's logits differ from the uncached run")
			}
			rows := logitRows(m, batch, e.Pool())
			fixGap = gap(rows[1], want[1].logits[0])
			if !sameBits(rows[0], want[2].logits[0]) || !sameBits(rows[1], want[1].logits[0]) {
				t.Fatal("batched: logits differ from the uncached runs")
			}
		})
	}

	// The production path: the engine itself serves the fully cached
	// prompt next to another one (common/engine/scheduler.go:Engine.admit
	// starts its prefill one token early). Undoing that fix fails here.
	t.Run("production engine", func(t *testing.T) {
		e := newEngine(t, m, config())
		serve(t, e, 100, request(1, p, 1))
		have := serve(t, e, 100, request(1, p, 1), request(2, q, 1))
		g, wrong := resultGap(have, want)
		t.Logf("with the bug (prefill starts at the %d matched tokens): alone, the empty step panics (%q); batched, its logits are the other prompt's (%v) and off its own by up to %.3g; fixed (last token recomputed): logits off by %.3g; the engine finds %d of 16 tokens cached and %d requests differ, logits by %.3g",
			cached, bugPanic, bugOther, bugGap, fixGap, have[1].cached, wrong, g)
		require.Equal(t, 16, have[1].cached, "the whole prompt is found")
		requireSame(t, have, want)
	})
}

// hiddenEvictable is a tree whose free capacity forgets its evictable
// blocks.
type hiddenEvictable struct{ *radix.Tree }

func (hiddenEvictable) Evictable() int { return 0 }

// TestPitfallEvictableNotCountedDeadlocksAdmission is the PITFALLS.md entry
// "Free capacity that leaves out evictable blocks": once the tree fills the
// pool, admission waits for memory nobody will ever free.
func TestPitfallEvictableNotCountedDeadlocksAdmission(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(13, 14))
	filler, next := request(1, tokens(rng, 28), 1), request(2, tokens(rng, 20), 3)
	seen := map[bool]string{}
	for _, tt := range []struct {
		name string
		wrap func(*radix.Tree) kvcache.PrefixCache
		done bool
	}{
		{"evictable blocks hidden", func(t *radix.Tree) kvcache.PrefixCache { return hiddenEvictable{t} }, false},
		{"Tree", func(t *radix.Tree) kvcache.PrefixCache { return t }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := withCache(config(), tt.wrap)
			c.NumBlocks = 8
			e := newEngine(t, m, c)
			serve(t, e, 100, filler) // leaves 7 of the 8 blocks in the tree
			steps := e.Stats().Steps
			res := serve(t, e, 200, next)[2]
			seen[tt.done] = fmt.Sprintf("second request done after 200 steps: %v, %d forward passes, %d blocks free of 8",
				res.done, e.Stats().Steps-steps, e.Pool().Allocator().NumFree())
			if res.done != tt.done {
				t.Fatalf("second request done after 200 steps: have %v; want %v", res.done, tt.done)
			}
			if !tt.done && e.Stats().Steps != steps {
				t.Fatalf("forward passes while stuck: have %d; want 0", e.Stats().Steps-steps)
			}
		})
	}
	t.Logf("with the bug (evictable blocks hidden): %s; fixed (Tree): %s", seen[false], seen[true])
}

// unaccounted is a tree that does not tell the audit about its blocks.
type unaccounted struct{ *radix.Tree }

func (unaccounted) Holds(int32) int { return 0 }

// pageTableAudit is the audit of a pool without a prefix cache: a block
// with references that no live page table names has leaked.
func pageTableAudit(p *kvcache.Pool, live []int) []int32 {
	named := map[int32]bool{}
	for _, key := range live {
		for _, b := range p.Pages(key) {
			named[b] = true
		}
	}
	var leaked []int32
	for b := range int32(p.Allocator().Total()) {
		if p.Allocator().Refs(b) > 0 && !named[b] {
			leaked = append(leaked, b)
		}
	}
	return leaked
}

// TestPitfallAuditIgnoringCacheReportsLeaks is the PITFALLS.md entry "An
// audit that ignores cache-held blocks reports leaks": an audit that counts
// only page tables takes every block the tree keeps for later for a leak.
func TestPitfallAuditIgnoringCacheReportsLeaks(t *testing.T) {
	m := loadModel(t)
	req := request(1, tokens(rand.New(rand.NewPCG(15, 16)), 13), 4)
	var bugLeaked, bugCached int
	var hidden, fixed string

	t.Run("page-table audit", func(t *testing.T) {
		e := newEngine(t, m, config())
		serve(t, e, 100, req)
		tree := e.Pool().Cache().(*radix.Tree)
		leaked := pageTableAudit(e.Pool(), nil)
		bugLeaked, bugCached = len(leaked), tree.Cached()
		if len(leaked) != tree.Cached() || tree.Cached() == 0 {
			t.Fatalf("page-table audit: have %d leaked; want all %d cached blocks reported", len(leaked), tree.Cached())
		}
	})
	t.Run("cache that hides its holds", func(t *testing.T) {
		e := newEngine(t, m, withCache(config(), func(t *radix.Tree) kvcache.PrefixCache { return unaccounted{t} }))
		defer func() {
			r := recover()
			hidden = fmt.Sprint(r)
			if r == nil || !strings.Contains(r.(string), "leaked blocks") {
				t.Fatalf("engine with Audit on: have panic %v; want a leaked-blocks report", r)
			}
		}()
		serve(t, e, 100, req)
	})
	t.Run("Pool.Audit with Tree.Holds", func(t *testing.T) {
		e := newEngine(t, m, config()) // Audit on: any report panics
		serve(t, e, 100, req)
		fixed = fmt.Sprint(e.Pool().Audit().Err())
		require.NoError(t, e.Pool().Audit().Err())
	})
	t.Logf("with the bug: an audit of page tables only reports %d leaked blocks, all %d the tree keeps; a cache hiding its holds makes the engine's audit panic (%.80s); fixed (Pool.Audit with Tree.Holds): %s",
		bugLeaked, bugCached, hidden, fixed)
}

// lateRecord is a tree that, like a pool storing a sequence's matched nodes
// only once its prefill has gone through, has no record of a sequence that
// ended before committing. With leak set it cannot release what such a
// sequence matched; either way it counts them.
type lateRecord struct {
	*radix.Tree
	leak      bool
	ids       map[int]int // engine sequence → tree sequence
	committed map[int]bool
	next      int
	aborted   int // sequences released before their first commit
}

func (l *lateRecord) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	l.next++
	l.ids[seq] = l.next
	return l.Tree.Match(l.next, salt, tokens)
}

func (l *lateRecord) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	if _, ok := l.ids[seq]; !ok {
		l.next++
		l.ids[seq] = l.next
	}
	l.committed[seq] = true
	return l.Tree.Insert(l.ids[seq], salt, tokens, pages, lent)
}

func (l *lateRecord) Release(seq int) {
	if !l.committed[seq] {
		l.aborted++
		if l.leak {
			delete(l.ids, seq)
			return
		}
	}
	l.Tree.Release(l.ids[seq])
	delete(l.ids, seq)
	delete(l.committed, seq)
}

// TestPitfallFailedPrefillLeaksMatchedRefs is the PITFALLS.md entry "A
// prefill that fails after its match keeps the matched references": with
// cost-aware admission a request can be admitted, match the cached prefix,
// and then fail to get blocks for the rest of its prompt (the blocks it
// matched were counted as evictable). The engine releases it and retries
// later; a cache that forgets what it matched pins those blocks for good,
// and the pool shrinks until a large prompt never fits.
func TestPitfallFailedPrefillLeaksMatchedRefs(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(17, 18))
	system := tokens(rng, 16)
	first := request(1, system, 1)                      // leaves 4 blocks in the tree
	long := request(2, tokens(rng, 13), 3)              // takes the 4 free blocks
	late := request(3, join(system, tokens(rng, 4)), 2) // matches 4 blocks, needs 1 more
	huge := request(4, tokens(rng, 31), 1)              // needs all 8 blocks
	seen := map[bool]string{}
	for _, leak := range []bool{true, false} {
		name := map[bool]string{true: "forgetful cache", false: "Tree"}[leak]
		t.Run(name, func(t *testing.T) {
			cache := &lateRecord{leak: leak, ids: map[int]int{}, committed: map[int]bool{}}
			c := withCache(config(), func(t *radix.Tree) kvcache.PrefixCache { cache.Tree = t; return cache })
			c.NumBlocks = 8
			c.Admission = engine.AdmitCostAware
			e := newEngine(t, m, c)
			serve(t, e, 100, first)
			serve(t, e, 100, long, late)
			if cache.aborted == 0 {
				t.Fatal("no admission failed after its match; the scenario is broken")
			}
			pinned := cache.Cached() - cache.Evictable()
			res := serve(t, e, 200, huge)[4]
			seen[leak] = fmt.Sprintf("%d admissions failed after their match, %d blocks pinned with no reader, the 8-block prompt done after 200 steps: %v",
				cache.aborted, pinned, res.done)
			if leak && (pinned == 0 || res.done) {
				t.Fatalf("forgetful cache: %d blocks pinned, 8-block prompt done %v; want pinned blocks and a prompt that never fits", pinned, res.done)
			}
			if !leak && (pinned != 0 || !res.done) {
				t.Fatalf("Tree: %d blocks pinned, 8-block prompt done %v; want 0 and done", pinned, res.done)
			}
		})
	}
	t.Logf("with the bug (forgetful cache): %s; fixed (Tree): %s", seen[true], seen[false])
}

// TestPitfallWholePromptPrefillCannotSeeCachedPrefix is the PITFALLS.md
// entry "Whole-prompt prefill cannot see a cached prefix": it attends only
// to the rows of the step: the cached prefix is invisible to it, so the
// prompt's logits are wrong. The engine therefore refuses a prefix cache
// without chunked prefill.
func TestPitfallWholePromptPrefillCannotSeeCachedPrefix(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(19, 20))
	system := tokens(rng, 16)
	prompt := join(system, tokens(rng, 4))
	want := run(t, m, baseline(config()), request(1, prompt, 1))[1].logits[0]

	c := config()
	c.ChunkedPrefill = false
	c.MaxBatchTokens, c.MaxContext = 4096, 4096
	_, err := engine.New(m, c)
	require.ErrorContains(t, err, "requires chunked prefill")
	gaps := map[bool]float64{}

	e := newEngine(t, m, config())
	serve(t, e, 100, request(2, system, 1))
	const key = 1001
	cached := open(t, e, key, prompt)
	require.Equal(t, 16, cached)
	for _, local := range []bool{true, false} {
		st := &model.Step{Local: local}
		addRows(st, e.Pool(), key, prompt, cached, cached, len(prompt)-cached)
		have := logitRows(m, st, e.Pool())[0]
		gaps[local] = gap(have, want)
		if sameBits(have, want) == local {
			t.Fatalf("suffix-only step with Local=%v: logits equal to the uncached run: %v; want %v", local, !local, local)
		}
	}
	t.Logf("with the bug (a whole-prompt step over the %d-token suffix, %d tokens cached): logits differ from the uncached run by up to %.3g; fixed (paged attention over the cached prefix): %.3g; the engine refuses the combination (%q)",
		len(prompt)-cached, cached, gaps[true], gaps[false], err)
}

// sharesPartialBlock is a tree that also caches the last, partially filled
// block of a committed prompt, and lends it to a request with that prompt.
type sharesPartialBlock struct {
	*radix.Tree
	a       *kvcache.Allocator
	bs      int
	prompt  []int32 // the prompt whose partial block is kept
	block   int32
	holds   int          // allocator references kept on block
	readers map[int]bool // sequences it was lent to
}

func (s *sharesPartialBlock) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	if s.readers[seq] { // the last lent page is the partial block, not the tree's
		return s.Tree.Insert(seq, salt, tokens, pages[:lent-1], lent-1) + 1
	}
	n := s.Tree.Insert(seq, salt, tokens, pages, lent)
	if full := len(tokens) / s.bs; len(tokens)%s.bs != 0 && s.prompt == nil && n == full {
		s.prompt, s.block = append([]int32(nil), tokens...), pages[full]
		s.a.Incref(s.block)
		s.holds++
	}
	return n
}

func (s *sharesPartialBlock) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	blocks, n := s.Tree.Match(seq, salt, tokens)
	if s.prompt != nil && n == len(s.prompt)/s.bs*s.bs && len(tokens) >= len(s.prompt) && slices.Equal(tokens[:len(s.prompt)], s.prompt) {
		s.a.Incref(s.block)
		s.holds++
		s.readers[seq] = true
		return append(blocks, s.block), len(s.prompt)
	}
	return blocks, n
}

func (s *sharesPartialBlock) Release(seq int) {
	s.Tree.Release(seq)
	if s.readers[seq] {
		delete(s.readers, seq)
		s.a.Decref(s.block)
		s.holds--
	}
}

func (s *sharesPartialBlock) Holds(b int32) int {
	if s.prompt != nil && b == s.block {
		return s.Tree.Holds(b) + s.holds
	}
	return s.Tree.Holds(b)
}

// TestPitfallPartialBlockIsRecomputed is the PITFALLS.md entry "Only whole
// blocks are shared": a 10-token prompt at block size 4 reuses 8 tokens and
// recomputes 2, even when sent twice. Sharing the partial third block too
// would put the next token's KV into a block another sequence reads; the
// pool refuses that write.
func TestPitfallPartialBlockIsRecomputed(t *testing.T) {
	m := loadModel(t)
	prompt := tokens(rand.New(rand.NewPCG(21, 22)), 10)
	want := run(t, m, baseline(config()), request(2, prompt, 3))
	var bugCached, fixCached, fixPrefilled int
	var bugErr, fixFirstErr string
	var fixGap float64

	t.Run("sharing the partial block", func(t *testing.T) {
		c := config()
		c.PrefixCache = func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
			return &sharesPartialBlock{Tree: radix.NewTree(a, bs), a: a, bs: bs, readers: map[int]bool{}}
		}
		e := newEngine(t, m, c)
		serve(t, e, 100, request(1, prompt, 1))
		res := serve(t, e, 100, request(2, prompt, 3))[2]
		bugCached, bugErr = res.cached, fmt.Sprint(res.err)
		if res.cached != 10 || res.err == nil || !strings.Contains(res.err.Error(), "lent by the prefix cache") {
			t.Fatalf("have cached %d, error %v; want 10 and a refused write into a lent block", res.cached, res.err)
		}
	})
	t.Run("Tree", func(t *testing.T) {
		e := newEngine(t, m, config())
		// Two tokens: the first request commits its prompt, then writes
		// position 10 into its own partial block, which the tree must not
		// have taken.
		first := serve(t, e, 100, request(1, prompt, 2))[1]
		fixFirstErr = fmt.Sprint(first.err)
		require.NoError(t, first.err, "the first request's own partial block")
		before := e.Stats().PrefillTokens
		have := serve(t, e, 100, request(2, prompt, 3))
		fixCached, fixPrefilled = have[2].cached, e.Stats().PrefillTokens-before
		fixGap, _ = resultGap(have, want)
		requireSame(t, have, want)
		if have[2].cached != 8 || e.Stats().PrefillTokens-before != 2 {
			t.Fatalf("have cached %d, prefilled %d; want 8, 2", have[2].cached, e.Stats().PrefillTokens-before)
		}
	})
	t.Logf("with the bug (the partial third block shared): %d of 10 tokens reused, then the first decode write is refused (%s); fixed (whole blocks only): the first request decodes into its own partial block (error: %s), the second reuses %d and recomputes %d, logits off by %.3g",
		bugCached, bugErr, fixFirstErr, fixCached, fixPrefilled, fixGap)
}

// TestPitfallConservativeAdmissionOverReserves is the PITFALLS.md entry
// "Conservative admission over-reserves": conservative admission charges
// the whole prompt even when most of it is cached; cost-aware admission
// charges only what must be computed. On a shared-prefix workload with a
// small pool, the second runs more requests at once, with the same output.
func TestPitfallConservativeAdmissionOverReserves(t *testing.T) {
	m := loadModel(t)
	p := workload.DefaultParams("prefix_caching")
	p.Requests, p.PrefixLen, p.SuffixMin, p.SuffixMax = 16, 96, 4, 12
	p.OutputMin, p.OutputMax, p.Vocab = 8, 8, m.Config.VocabSize
	wl, err := workload.Generate("prefix_caching", p)
	require.NoError(t, err)
	var reqs []engine.Request
	for _, r := range wl {
		reqs = append(reqs, request(r.ID, r.Prompt, r.MaxTokens))
	}
	c := config()
	c.NumBlocks = 64 // 256 tokens: two whole prompts, or the prefix and many suffixes
	c.MaxRunning = 16
	want := run(t, m, baseline(c), reqs...)

	stats := map[engine.Admission]engine.Stats{}
	for _, adm := range []engine.Admission{engine.AdmitConservative, engine.AdmitCostAware} {
		c.Admission = adm
		e := newEngine(t, m, c)
		have := serve(t, e, 10_000, reqs[0]) // the first request fills the cache
		for id, r := range serve(t, e, 10_000, reqs[1:]...) {
			have[id] = r
		}
		requireSame(t, have, want)
		stats[adm] = e.Stats()
	}
	cons, aware := stats[engine.AdmitConservative], stats[engine.AdmitCostAware]
	t.Logf("with conservative admission (the whole prompt charged): at most %d requests running, %d steps, %d preemptions; cost-aware (only the uncached part): %d running, %d steps, %d preemptions; same output",
		cons.MaxRunning, cons.Steps, cons.Preemptions, aware.MaxRunning, aware.Steps, aware.Preemptions)
	if aware.MaxRunning <= cons.MaxRunning {
		t.Fatalf("MaxRunning: cost-aware %d, conservative %d; want cost-aware higher", aware.MaxRunning, cons.MaxRunning)
	}
}

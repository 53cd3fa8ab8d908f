package ghost

import (
	"fmt"
	"time"
)

// DefaultPriority is the priority of a block no retention rule covers, on
// TensorRT-LLM's scale of 0 (evicted first) to 100 (evicted last).
const DefaultPriority = 35

// Retention is a request's retention policy, after TensorRT-LLM's
// KvCacheRetentionConfig: a priority per range of prompt tokens, and one
// for the blocks the request generates, each for a duration.
type Retention struct {
	// Ranges give prompt blocks their priorities. A block takes the range
	// its first token falls in (TensorRT-LLM's per-block rule), the first
	// listed if several do; a prompt block in no range has
	// DefaultPriority.
	Ranges []TokenRange
	// Decode is the priority of blocks past the prompt (TensorRT-LLM's
	// decode_retention_priority and decode_duration_ms); nil:
	// DefaultPriority for ever.
	Decode *Level
}

// TokenRange is TensorRT-LLM's TokenRangeRetentionConfig: prompt tokens
// [Start, End) (End 0: to the end of the prompt) at Priority, for For once
// a block becomes idle (0: it never lapses).
type TokenRange struct {
	Start, End int
	Priority   int
	For        time.Duration
}

// Level is a priority and how long it lasts once a block is idle (0: for
// ever).
type Level struct {
	Priority int
	For      time.Duration
}

// RetentionFunc gives the retention of a request, from what the cache
// seam sees of it: its cache salt and its prompt. A server that takes a
// retention per request registers it where the function finds it (by
// salt, for a tenant's policy; by prompt, for a request's), or encodes it
// in the salt.
type RetentionFunc func(salt string, prompt []int32) Retention

// Priority is TensorRT-LLM's prioritized LRU: every block has a priority
// from 0 to 100, all idle leaves of the lowest priority go before any of
// the next, and among leaves of one priority the one idle longest goes
// first. retention gives each request's priorities (nil: every block at
// DefaultPriority, which is LRU by release time).
//
// What it takes from TensorRT-LLM (docs/source/features/kvcache.md and the
// eviction policy of its batch manager):
//
//   - A block's priority comes from the request that caches it: its
//     prompt range's, or the decode priority for a block past the prompt.
//   - A Match that lends a block sets the block's priority to the new
//     request's for it, when the request has one; when it has none, the
//     priority stays and its duration is cleared (TensorRT-LLM's
//     claimBlock), so it no longer lapses. New values always override old.
//   - A duration starts when the block becomes idle (is released), and
//     when it runs out the block falls back to DefaultPriority as the most
//     recent block of that priority, ordered by when it lapsed (TensorRT-LLM
//     moves it when its scheduler next refreshes; the ghost as if at the
//     instant it lapsed). A block in use never lapses.
//
// What it leaves out: the secondary (host) memory and offloading by
// priority, partial block reuse, and the transfer modes.
//
// It is not the compressed trie's trie.Priority, which takes nothing from
// the request: that one ranks a leaf by its last use times the number of
// sequences that used it (LastUse × Refs), a recency weighted by
// popularity, over compressed leaves it trims a block at a time. With no
// retention this policy is LRU by release time instead.
func Priority(retention RetentionFunc) Policy {
	return Policy{Name: "priority", build: func(c *cache, env env) evictor {
		e := &priorityEvictor{c: c, env: env, retention: retention, seqs: map[int]seqRetention{}}
		e.heap = leafHeap{c: c, less: func(a, b *node) bool {
			switch {
			case a.prio != b.prio:
				return a.prio < b.prio
			case a.when != b.when:
				return a.when < b.when
			}
			return a.stamp < b.stamp
		}}
		e.expiring = leafHeap{c: c, expiry: true, less: func(a, b *node) bool { return a.expires < b.expires }}
		return e
	}}
}

type priorityEvictor struct {
	c         *cache
	env       env
	retention RetentionFunc
	seqs      map[int]seqRetention
	heap      leafHeap // the candidates, lowest priority, idle longest on top
	expiring  leafHeap // idle blocks whose priority lapses, soonest on top
}

// seqRetention is a live sequence's retention and its prompt's length.
type seqRetention struct {
	ret    Retention
	prompt int
}

// clock returns the wall-clock time since the Tap started, in nanoseconds
// (monotonic).
func (e *priorityEvictor) clock() int64 { return int64(e.env.now().Sub(e.env.start)) }

func (e *priorityEvictor) opened(seq int, salt string, prompt []int32) {
	if e.retention == nil {
		return
	}
	r := e.retention(salt, prompt)
	for _, tr := range r.Ranges {
		checkPriority(tr.Priority)
	}
	if r.Decode != nil {
		checkPriority(r.Decode.Priority)
	}
	e.seqs[seq] = seqRetention{ret: r, prompt: len(prompt)}
}

func checkPriority(p int) {
	if p < 0 || p > 100 {
		panic(fmt.Sprintf("ghost: retention priority must be in [0, 100], have %d", p))
	}
}

// rule returns the priority seq's retention gives node n's block, and
// whether it gives one.
func (e *priorityEvictor) rule(n int32, seq int) (Level, bool) {
	s, ok := e.seqs[seq]
	if !ok {
		return Level{}, false
	}
	first := int(e.c.nodes[n].depth-1) * e.c.bs
	if first >= s.prompt {
		if s.ret.Decode == nil {
			return Level{}, false
		}
		return *s.ret.Decode, true
	}
	for _, r := range s.ret.Ranges {
		if first >= r.Start && (r.End == 0 || first < r.End) {
			return Level{Priority: r.Priority, For: r.For}, true
		}
	}
	return Level{}, false
}

func (e *priorityEvictor) created(n int32, seq int) {
	l, ok := e.rule(n, seq)
	if !ok {
		l = Level{Priority: DefaultPriority}
	}
	nd := &e.c.nodes[n]
	nd.prio, nd.dur = int8(l.Priority), int64(l.For)
}

func (e *priorityEvictor) hit(n int32, seq int) {
	nd := &e.c.nodes[n]
	if l, ok := e.rule(n, seq); ok {
		nd.prio, nd.dur = int8(l.Priority), int64(l.For)
		return
	}
	nd.dur = 0
}

func (e *priorityEvictor) idle(n int32) {
	nd := &e.c.nodes[n]
	nd.when, nd.stamp = e.clock(), e.c.now()
	if nd.dur > 0 && nd.prio != DefaultPriority {
		nd.expires = nd.when + nd.dur
		e.expiring.push(n)
	}
}

func (e *priorityEvictor) busy(n int32) {
	nd := &e.c.nodes[n]
	if nd.xidx == 0 {
		return
	}
	e.expiring.remove(n)
	if nd.expires <= e.clock() { // lapsed before this use took it
		nd.prio, nd.dur = DefaultPriority, 0
	}
	nd.expires = 0
}

func (e *priorityEvictor) enter(n int32) { e.heap.push(n) }
func (e *priorityEvictor) leave(n int32) { e.heap.remove(n) }

func (e *priorityEvictor) victim() int32 {
	e.lapse()
	return e.heap.top()
}

func (e *priorityEvictor) evicted(n int32) {
	if e.c.nodes[n].xidx != 0 {
		e.expiring.remove(n)
	}
}

func (e *priorityEvictor) released(seq int) { delete(e.seqs, seq) }

// lapse gives every idle block whose duration has run out DefaultPriority,
// as the most recent such block at the instant it lapsed.
func (e *priorityEvictor) lapse() {
	if e.expiring.len() == 0 {
		return
	}
	now := e.clock()
	for e.expiring.len() > 0 {
		n := e.expiring.top()
		nd := &e.c.nodes[n]
		if nd.expires > now {
			return
		}
		e.expiring.remove(n)
		nd.prio, nd.dur, nd.when, nd.stamp, nd.expires = DefaultPriority, 0, nd.expires, e.c.now(), 0
		if nd.hidx != 0 {
			e.heap.fix(n)
		}
	}
}

package ghost

import (
	"fmt"
	"time"
)

// A Policy is an eviction policy a ghost runs. Build one with LRU, LFU,
// SLRU, ARC or Priority; Name labels the ghost's row in a Report and may
// be changed.
//
// Every policy evicts only idle leaves: blocks no live sequence uses and
// no cached block hangs under, as the radix tree does. A prefix chain
// therefore loses its tail first, and a policy ranks only the leaves it
// could take now; a parent joins the candidates when its last child goes.
type Policy struct {
	Name  string
	build func(c *cache, env env) evictor
}

// env is what a Tap tells its ghosts' policies about the pool.
type env struct {
	capacity int              // the pool's blocks: ARC's c, SLRU's segment sizes
	now      func() time.Time // the priority policy's clock
	start    time.Time
}

// evictor is a policy's state in one ghost. The cache calls it as blocks
// change; a node is a candidate exactly while it is live, has no user and
// has no children, and the cache calls enter and leave at each change of
// that, so a policy that ranks candidates keeps exactly them.
type evictor interface {
	opened(seq int, salt string, prompt []int32) // a Match is about to walk prompt for seq
	created(n int32, seq int)                    // seq's Insert cached n
	hit(n int32, seq int)                        // seq's Match lent n
	idle(n int32)                                // n has no user now (released, or cached without one)
	busy(n int32)                                // n gained its first user
	enter(n int32)                               // n became a candidate
	leave(n int32)                               // n stopped being one (a user, a child, or its eviction)
	victim() int32                               // the candidate to evict next, or none
	evicted(n int32)                             // n is being dropped (after leave)
	released(seq int)                            // seq is gone
}

// auditor is an evictor that can check its own books (tests).
type auditor interface{ audit() error }

// base is an evictor's do-nothing hooks.
type base struct{}

func (base) opened(int, string, []int32) {}
func (base) created(int32, int)          {}
func (base) hit(int32, int)              {}
func (base) idle(int32)                  {}
func (base) busy(int32)                  {}
func (base) enter(int32)                 {}
func (base) leave(int32)                 {}
func (base) evicted(int32)               {}
func (base) released(int)                {}

// LRU is the radix tree's policy, kept the radix tree's way: a ring of
// every block without a user, in the order they became idle, a block
// cached without a user joining right before its idle parent. Every block
// on the ring comes after its descendants, so the front is a leaf and
// Evict pops it. On the same traffic a ghost with this policy makes the
// radix tree's every decision (TestGhostLRUIsTheRadixTree).
func LRU() Policy {
	return Policy{Name: "LRU", build: func(c *cache, _ env) evictor { return &lruEvictor{c: c, ring: newList(c)} }}
}

type lruEvictor struct {
	base
	c    *cache
	ring list
}

func (e *lruEvictor) idle(n int32) {
	at := none
	if p := e.c.nodes[n].parent; p != none && e.c.nodes[p].users == 0 {
		at = p
	}
	e.ring.insertBefore(n, at)
}

func (e *lruEvictor) busy(n int32)    { e.ring.remove(n) }
func (e *lruEvictor) evicted(n int32) { e.ring.remove(n) }
func (e *lruEvictor) victim() int32   { return e.ring.head }

// audit checks that the ring holds exactly the idle nodes, each before its
// idle parent.
func (e *lruEvictor) audit() error {
	pos := map[int32]int{}
	i := 0
	for n := e.ring.head; n != none; n = e.c.nodes[n].next {
		if e.c.nodes[n].users != 0 || !e.c.nodes[n].live {
			return fmt.Errorf("ghost %s: node %d is on the ring but not idle", e.c.name, n)
		}
		pos[n] = i
		i++
	}
	if i != e.ring.n || i != e.c.evictable() {
		return fmt.Errorf("ghost %s: the ring links %d nodes, counts %d, %d are idle", e.c.name, i, e.ring.n, e.c.evictable())
	}
	for n, at := range pos {
		if p := e.c.nodes[n].parent; p != none && e.c.nodes[p].users == 0 && pos[p] < at {
			return fmt.Errorf("ghost %s: node %d is on the ring after its parent %d", e.c.name, n, p)
		}
	}
	return nil
}

// LFU evicts the least frequently used idle leaf, and among those as
// frequent the least recently used (the one idle longest). A block's
// frequency is the number of Matches that lent it since it was cached,
// plus one for the Insert that cached it; it is forgotten when the block
// is evicted, and never decays (in-cache LFU, no aging). Since every Match
// through a block passes its parent, a parent is always at least as
// frequent as its children.
func LFU() Policy {
	return Policy{Name: "LFU", build: func(c *cache, _ env) evictor {
		return &lfuEvictor{c: c, heap: leafHeap{c: c, less: func(a, b *node) bool {
			if a.freq != b.freq {
				return a.freq < b.freq
			}
			return a.stamp < b.stamp
		}}}
	}}
}

type lfuEvictor struct {
	base
	c    *cache
	heap leafHeap
}

func (e *lfuEvictor) created(n int32, _ int) {
	nd := &e.c.nodes[n]
	nd.freq, nd.stamp = 1, e.c.now()
}

func (e *lfuEvictor) hit(n int32, _ int) { e.c.nodes[n].freq++ }
func (e *lfuEvictor) idle(n int32)       { e.c.nodes[n].stamp = e.c.now() }
func (e *lfuEvictor) enter(n int32)      { e.heap.push(n) }
func (e *lfuEvictor) leave(n int32)      { e.heap.remove(n) }
func (e *lfuEvictor) victim() int32      { return e.heap.top() }

// SLRU segments.
const (
	probation uint8 = iota
	protected
)

// SLRU is segmented LRU: a block enters the probation segment when it is
// cached and moves to the protected segment when a later Match lends it
// (its second use). The protected segment holds at most fraction of the
// pool's blocks (SLRU(0.8): 80%); past that, the protected block idle the
// longest is demoted to probation as its most recent block (a block in use
// counts as the most recent, so it is never demoted while used). Evict
// takes the probation leaf idle longest, and a protected leaf only when no
// probation block is evictable.
func SLRU(fraction float64) Policy {
	if fraction < 0 || fraction > 1 {
		panic(fmt.Sprintf("ghost: SLRU protected fraction must be in [0, 1], have %v", fraction))
	}
	return Policy{Name: fmt.Sprintf("SLRU %.0f%%", 100*fraction), build: func(c *cache, env env) evictor {
		byAge := func(a, b *node) bool { return a.stamp < b.stamp }
		return &slruEvictor{
			c:         c,
			capacity:  int(fraction * float64(env.capacity)),
			probation: leafHeap{c: c, less: byAge},
			protected: leafHeap{c: c, less: byAge},
			idleProt:  newList(c),
		}
	}}
}

type slruEvictor struct {
	base
	c                    *cache
	capacity             int // most blocks the protected segment holds
	probation, protected leafHeap
	idleProt             list // protected blocks without a user, idle longest first
	nProt                int
}

func (e *slruEvictor) heapOf(n int32) *leafHeap {
	if e.c.nodes[n].seg == protected {
		return &e.protected
	}
	return &e.probation
}

func (e *slruEvictor) created(n int32, _ int) {
	nd := &e.c.nodes[n]
	nd.seg, nd.stamp = probation, e.c.now()
}

func (e *slruEvictor) hit(n int32, _ int) {
	nd := &e.c.nodes[n]
	if nd.seg == probation {
		nd.seg = protected
		e.nProt++
		e.demote()
	}
}

func (e *slruEvictor) idle(n int32) {
	nd := &e.c.nodes[n]
	nd.stamp = e.c.now()
	if nd.seg == protected {
		e.idleProt.pushBack(n)
		e.demote()
	}
}

func (e *slruEvictor) busy(n int32) {
	if e.c.nodes[n].seg == protected {
		e.idleProt.remove(n)
	}
}

func (e *slruEvictor) enter(n int32) { e.heapOf(n).push(n) }
func (e *slruEvictor) leave(n int32) { e.heapOf(n).remove(n) }

func (e *slruEvictor) victim() int32 {
	if e.probation.len() > 0 {
		return e.probation.top()
	}
	return e.protected.top()
}

func (e *slruEvictor) evicted(n int32) {
	if e.c.nodes[n].seg == protected {
		e.idleProt.remove(n)
		e.nProt--
	}
}

// demote moves protected blocks idle longest to probation until the
// protected segment fits.
func (e *slruEvictor) demote() {
	for e.nProt > e.capacity && e.idleProt.n > 0 {
		n := e.idleProt.head
		e.idleProt.remove(n)
		nd := &e.c.nodes[n]
		cand := nd.hidx != 0
		if cand {
			e.protected.remove(n)
		}
		nd.seg, nd.stamp = probation, e.c.now()
		e.nProt--
		if cand {
			e.probation.push(n)
		}
	}
}

// ARC lists.
const (
	t1 uint8 = iota
	t2
)

// ARC is Megiddo and Modha's adaptive replacement cache (FAST 2003),
// adapted to a prefix cache whose evictions the pool asks for. Its cache
// size c is the pool's blocks. Cached blocks are in T1 (used once: cached
// and not matched since) or T2 (matched at least once since cached, or
// cached again soon after an eviction); B1 and B2 remember the chain keys
// of blocks evicted from T1 and T2, and p is the target size of T1:
//
//   - a Match that lends a T1 block moves it to T2 (case I);
//   - an Insert that caches a block whose key is in B1 grows p by
//     max(1, |B2|/|B1|) and puts the block in T2; one in B2 shrinks p by
//     max(1, |B1|/|B2|), into T2 as well (cases II and III); any other
//     new block goes into T1 (case IV);
//   - an eviction (REPLACE) takes from T1 when |T1| > p and from T2
//     otherwise, and its key goes into B1 or B2.
//
// The adaptation to prefix chains: REPLACE takes not the LRU block of the
// list but its LRU idle leaf (the leaf of that list idle longest), since
// only idle leaves may go, and takes from the other list when the chosen
// one has none. A Match does not adapt p: a missed block adapts it when it
// is cached again, which is when ARC would have fetched it. Since the pool,
// not the ghost, decides when to evict, case IV's eviction on a full cache
// is left to the pool, and the histories are trimmed to ARC's bounds
// instead: |T1| + |B1| ≤ c and |T1| + |T2| + |B1| + |B2| ≤ 2c.
func ARC() Policy {
	return Policy{Name: "ARC", build: func(c *cache, env env) evictor {
		byAge := func(a, b *node) bool { return a.stamp < b.stamp }
		return &arcEvictor{
			c: c, size: env.capacity,
			t1: leafHeap{c: c, less: byAge}, t2: leafHeap{c: c, less: byAge},
			b1: newKeyList(), b2: newKeyList(),
		}
	}}
}

type arcEvictor struct {
	base
	c      *cache
	size   int      // c in the paper
	t1, t2 leafHeap // the idle leaves of T1 and T2
	n1, n2 int      // |T1|, |T2|: every cached block, used or not
	b1, b2 keyList
	p      float64
}

func (e *arcEvictor) heapOf(n int32) *leafHeap {
	if e.c.nodes[n].seg == t2 {
		return &e.t2
	}
	return &e.t1
}

func (e *arcEvictor) created(n int32, _ int) {
	nd := &e.c.nodes[n]
	nd.stamp = e.c.now()
	b1, b2 := float64(e.b1.len()), float64(e.b2.len())
	switch {
	case e.b1.has(nd.key):
		e.p = min(e.p+max(1, b2/b1), float64(e.size))
		e.b1.remove(nd.key)
		nd.seg = t2
	case e.b2.has(nd.key):
		e.p = max(e.p-max(1, b1/b2), 0)
		e.b2.remove(nd.key)
		nd.seg = t2
	default:
		nd.seg = t1
	}
	if nd.seg == t1 {
		e.n1++
	} else {
		e.n2++
	}
	e.trim()
}

func (e *arcEvictor) hit(n int32, _ int) {
	if nd := &e.c.nodes[n]; nd.seg == t1 {
		nd.seg = t2
		e.n1--
		e.n2++
	}
}

func (e *arcEvictor) idle(n int32)  { e.c.nodes[n].stamp = e.c.now() }
func (e *arcEvictor) enter(n int32) { e.heapOf(n).push(n) }
func (e *arcEvictor) leave(n int32) { e.heapOf(n).remove(n) }

func (e *arcEvictor) victim() int32 {
	if e.t1.len() > 0 && (float64(e.n1) > e.p || e.t2.len() == 0) {
		return e.t1.top()
	}
	return e.t2.top()
}

func (e *arcEvictor) evicted(n int32) {
	nd := &e.c.nodes[n]
	if nd.seg == t1 {
		e.n1--
		e.b1.pushBack(nd.key)
	} else {
		e.n2--
		e.b2.pushBack(nd.key)
	}
	e.trim()
}

// trim keeps the histories within ARC's bounds, forgetting their oldest
// keys.
func (e *arcEvictor) trim() {
	for e.n1+e.b1.len() > e.size && e.b1.len() > 0 {
		e.b1.popFront()
	}
	for e.n1+e.n2+e.b1.len()+e.b2.len() > 2*e.size {
		switch {
		case e.b2.len() > 0:
			e.b2.popFront()
		case e.b1.len() > 0:
			e.b1.popFront()
		default:
			return
		}
	}
}

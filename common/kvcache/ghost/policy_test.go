package ghost

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The hand-made cases run requests one at a time through a pool of 10
// blocks of 4 tokens (8 with the ARC cycle), every prompt two blocks, so
// the pool holds five prompts; the real cache is a radix tree, whose
// evictions set the pressure every ghost feels.
const bs = 4

// TestLFUKeepsAFrequentPrefixLRUDrops: A is used three times, then five
// prompts once each; the fifth evicts one prompt. LRU drops A, the least
// recently used; LFU drops the first of the prompts used once, and finds
// A when it comes back.
func TestLFUKeepsAFrequentPrefixLRUDrops(t *testing.T) {
	r := newRig(t, 10, bs, LRU(), LFU())
	a := prompt(0, 2, bs)
	for range 3 {
		r.use("", a)
	}
	for i := range 5 {
		r.use("", prompt(1000*(i+1), 2, bs))
	}
	real, ghosts := r.use("", a)
	require.Equal(t, 0, real, "the radix tree evicted A")
	require.Equal(t, []int{0, 8}, ghosts, "LRU, LFU")
	// Among the prompts used once, recency decides: the last is still
	// cached in both.
	_, ghosts = r.use("", prompt(5000, 2, bs))
	require.Equal(t, []int{8, 8}, ghosts)
}

// TestSLRUProtectsWhatWasUsedTwice: H is used twice (protected), then a
// scan of prompts used once goes through. LRU loses H to the scan; SLRU
// takes the scan's blocks from probation and keeps H.
func TestSLRUProtectsWhatWasUsedTwice(t *testing.T) {
	r := newRig(t, 10, bs, LRU(), SLRU(0.8))
	h := prompt(0, 2, bs)
	r.use("", h)
	r.use("", h)
	for i := range 5 {
		r.use("", prompt(1000*(i+1), 2, bs))
	}
	_, ghosts := r.use("", h)
	require.Equal(t, []int{0, 8}, ghosts, "LRU, SLRU")
}

// TestSLRUDemotesPastItsProtectedSize: with a protected segment of 20% of
// the pool (two blocks), protecting H2 demotes H1 to probation, older than
// any prompt of the scan that follows, so H1 is the first block to go;
// SLRU 80% protects both, and loses the scan's first prompt instead. H2
// stays protected in both.
func TestSLRUDemotesPastItsProtectedSize(t *testing.T) {
	r := newRig(t, 10, bs, SLRU(0.8), SLRU(0.2))
	h1, h2 := prompt(0, 2, bs), prompt(500, 2, bs)
	r.use("", h1)
	r.use("", h1)
	r.use("", h2)
	r.use("", h2)
	for i := range 4 {
		r.use("", prompt(1000*(i+1), 2, bs))
	}
	_, ghosts := r.use("", h1)
	require.Equal(t, []int{8, 0}, ghosts, "SLRU 80%, SLRU 20%: H1")
	_, ghosts = r.use("", h2)
	require.Equal(t, []int{8, 8}, ghosts, "SLRU 80%, SLRU 20%: H2")
}

// TestARCResistsAScan is SLRU's case for ARC: H, used twice, is in T2;
// with p at 0, every eviction takes from T1, the scan's.
func TestARCResistsAScan(t *testing.T) {
	r := newRig(t, 10, bs, LRU(), ARC())
	h := prompt(0, 2, bs)
	r.use("", h)
	r.use("", h)
	for i := range 5 {
		r.use("", prompt(1000*(i+1), 2, bs))
	}
	_, ghosts := r.use("", h)
	require.Equal(t, []int{0, 8}, ghosts, "LRU, ARC")
}

// TestARCAdaptsToRecency: H is used twice (frequent), then X1..X4 cycle
// through a pool of 8 blocks that holds four prompts. LRU gives up H and
// hits every X from the second round on; LFU clings to H and thrashes
// (each X is evicted before it comes back); ARC starts like LFU, but each
// X that returns from B1 grows p, until ARC evicts from T2 and ends where
// LRU is: every X of the last round hits.
func TestARCAdaptsToRecency(t *testing.T) {
	r := newRig(t, 8, bs, LRU(), LFU(), ARC())
	h := prompt(0, 2, bs)
	r.use("", h)
	r.use("", h)
	xs := [][]int32{prompt(1000, 2, bs), prompt(2000, 2, bs), prompt(3000, 2, bs), prompt(4000, 2, bs)}
	for range 3 {
		for _, x := range xs {
			r.use("", x)
		}
	}
	arc := ghostOf(r.tap, "ARC").ev.(*arcEvictor)
	require.Greater(t, arc.p, 0.0, "B1 hits grow ARC's target for T1")
	got := make([]int, 3)
	for _, x := range xs {
		_, ghosts := r.use("", x)
		for i, n := range ghosts {
			got[i] += n
		}
	}
	require.Equal(t, []int{32, 0, 32}, got, "LRU, LFU, ARC: tokens found in the last round")
}

// TestARCAdaptsBackToFrequency: after TestARCAdaptsToRecency's rounds
// have grown p, the Xs are all in T2. New prompts Y1..Y3 then go into T1,
// which p lets grow, so each eviction they cause takes from T2; when the
// Xs evicted that way come back from B2, p shrinks again.
func TestARCAdaptsBackToFrequency(t *testing.T) {
	r := newRig(t, 8, bs, ARC())
	arc := ghostOf(r.tap, "ARC").ev.(*arcEvictor)
	h := prompt(0, 2, bs)
	r.use("", h)
	r.use("", h)
	xs := [][]int32{prompt(1000, 2, bs), prompt(2000, 2, bs), prompt(3000, 2, bs), prompt(4000, 2, bs)}
	for range 3 {
		for _, x := range xs {
			r.use("", x)
		}
	}
	high := arc.p
	require.Equal(t, 4.0, high, "X1 and X2 came back from B1, two blocks each")
	ys := [][]int32{prompt(10000, 2, bs), prompt(20000, 2, bs), prompt(30000, 2, bs)}
	for _, y := range ys {
		r.use("", y)
	}
	g := ghostOf(r.tap, "ARC")
	require.Equal(t, []int{8, 8, 8}, cachedOf(r, g, ys...), "T1 may hold p blocks: the Ys stay")
	require.Equal(t, []int{0, 0, 0, 8}, cachedOf(r, g, xs...), "their evictions took T2's oldest, the Xs")
	for _, x := range xs[:3] {
		r.use("", x)
	}
	require.Less(t, arc.p, high, "B2 hits shrink ARC's target for T1")
}

// TestPriorityEvictsTheLowestPriorityFirst: H's request gives its whole
// prompt priority 100; a scan at the default priority then fills the
// pool. LRU evicts H, the oldest; the priority policy evicts the scan's
// oldest prompt and keeps H.
func TestPriorityEvictsTheLowestPriorityFirst(t *testing.T) {
	h := prompt(0, 2, bs)
	r := newRig(t, 10, bs, LRU(), Priority(func(salt string, _ []int32) Retention {
		if salt == "pinned" {
			return Retention{Ranges: []TokenRange{{Start: 0, Priority: 100}}}
		}
		return Retention{}
	}))
	r.use("pinned", h)
	for i := range 5 {
		r.use("", prompt(1000*(i+1), 2, bs))
	}
	_, ghosts := r.use("pinned", h)
	require.Equal(t, []int{0, 8}, ghosts, "LRU, priority")
}

// TestPriorityRanges: a block takes the range its first token falls in.
// A's ranges are tokens [0, 3) at 90 and [3, end) at 10, so its first
// block (tokens 0 to 3) is at 90 and its second (4 to 7) at 10; B is all
// default. Evictions take A's second block, then B's two, and leave A's
// first, the only block above the default.
func TestPriorityRanges(t *testing.T) {
	ret := func(salt string, _ []int32) Retention {
		if salt != "a" {
			return Retention{}
		}
		return Retention{Ranges: []TokenRange{{Start: 0, End: 3, Priority: 90}, {Start: 3, End: 0, Priority: 10}}}
	}
	r := newRig(t, 10, bs, Priority(ret))
	g := ghostOf(r.tap, "priority")
	r.use("a", prompt(0, 2, bs))
	r.use("", prompt(1000, 2, bs))
	require.Equal(t, []int8{90, 10, DefaultPriority, DefaultPriority}, priorities(g))
	g.evict(1)
	require.Equal(t, []int8{90, DefaultPriority, DefaultPriority}, priorities(g), "the priority-10 block went first")
	g.evict(2)
	require.Equal(t, []int8{90}, priorities(g), "then the default ones, never the priority-90 block while they last")
}

// priorities lists the priorities of g's live nodes by slot.
func priorities(g *cache) []int8 {
	var out []int8
	for i := range g.nodes {
		if g.nodes[i].live {
			out = append(out, g.nodes[i].prio)
		}
	}
	return out
}

// TestPriorityLapses: H is cached at priority 100 for 10 s of idleness.
// B is released at 5 s and C at 15 s, both at the default priority. At 20
// s H's priority has lapsed at 10 s, so it falls between them: B goes
// first, then H, then C. Without the duration H would outlive both.
func TestPriorityLapses(t *testing.T) {
	h := prompt(0, 2, bs)
	ret := func(_ string, p []int32) Retention {
		if p[0] == h[0] {
			return Retention{Ranges: []TokenRange{{Start: 0, Priority: 100, For: 10 * time.Second}}}
		}
		return Retention{}
	}
	r := newRig(t, 10, bs, Priority(ret))
	g := ghostOf(r.tap, "priority")
	r.use("", h) // released at 0 s
	r.clock.advance(5 * time.Second)
	r.use("", prompt(1000, 2, bs)) // B
	r.clock.advance(10 * time.Second)
	r.use("", prompt(2000, 2, bs)) // C
	r.clock.advance(5 * time.Second)
	g.evict(2)
	require.Equal(t, []int{8, 0, 8}, cachedOf(r, g, h, prompt(1000, 2, bs), prompt(2000, 2, bs)), "B goes first")
	g.evict(2)
	require.Equal(t, []int{0, 0, 8}, cachedOf(r, g, h, prompt(1000, 2, bs), prompt(2000, 2, bs)), "then H, whose priority lapsed")
}

// TestPriorityDecodeBlocks: blocks past the prompt take the decode
// priority. A's one prompt block is at the default priority and the block
// it generated at 0; B, one default block, is released after A. Evicting
// one block takes A's generated block, not B, the more recent at the
// default priority.
func TestPriorityDecodeBlocks(t *testing.T) {
	ret := func(salt string, _ []int32) Retention {
		if salt == "a" {
			return Retention{Decode: &Level{Priority: 0}}
		}
		return Retention{}
	}
	r := newRig(t, 10, bs, Priority(ret))
	g := ghostOf(r.tap, "priority")
	id := r.next
	r.next++
	require.Equal(t, 0, r.h.StartSalted(id, "a", prompt(0, 1, bs)))
	require.True(t, r.h.Extend(id, prompt(100, 1, bs)))
	r.h.Finish(id)
	r.use("", prompt(1000, 1, bs))
	require.Equal(t, []int8{DefaultPriority, 0, DefaultPriority}, priorities(g))
	g.evict(1)
	require.Equal(t, []int8{DefaultPriority, DefaultPriority}, priorities(g))
}

// TestPriorityMatchOverridesAndClears follows TensorRT-LLM's claim of a
// block: a Match by a request that gives the block a priority sets it
// (and its duration); a Match by one that gives none keeps the priority
// but clears its duration, so that it never lapses.
func TestPriorityMatchOverridesAndClears(t *testing.T) {
	h := prompt(0, 2, bs)
	timed := Retention{Ranges: []TokenRange{{Start: 0, Priority: 80, For: time.Second}}}
	cur := timed
	r := newRig(t, 10, bs, Priority(func(string, []int32) Retention { return cur }))
	g := ghostOf(r.tap, "priority")
	r.use("", h)
	require.Equal(t, []int8{80, 80}, priorities(g))
	r.clock.advance(2 * time.Second)
	g.ev.victim() // the policy looks at the clock when it picks
	require.Equal(t, []int8{DefaultPriority, DefaultPriority}, priorities(g), "a second after its release, the priority lapsed")

	r.use("", h) // the same request again: 80 for a second
	require.Equal(t, []int8{80, 80}, priorities(g))
	r.clock.advance(2 * time.Second)
	cur = Retention{} // a request with no rule for these blocks
	r.use("", h)
	require.Equal(t, []int8{DefaultPriority, DefaultPriority}, priorities(g), "lapsed before this Match took the blocks, though nothing evicted since")

	cur = timed
	r.use("", h)
	cur = Retention{}
	r.use("", h) // at once, before the second is up
	r.clock.advance(time.Hour)
	g.ev.victim()
	require.Equal(t, []int8{80, 80}, priorities(g), "the Match cleared the duration: the priority never lapses")

	cur = Retention{Ranges: []TokenRange{{Start: 0, Priority: 5}}}
	r.use("", h)
	require.Equal(t, []int8{5, 5}, priorities(g), "a new priority overrides the old")
}

// cachedOf returns how many tokens of each prompt g holds, asking it as a
// Match would without changing it.
func cachedOf(r *rig, g *cache, prompts ...[]int32) []int {
	var out []int
	for _, p := range prompts {
		s := &seqKeys{}
		keys := r.tap.keys(s, p)
		n, got := none, 0
		for _, k := range keys {
			if n = g.child(n, k); n == none {
				break
			}
			got += g.bs
		}
		out = append(out, got)
	}
	return out
}

package bound

import (
	"math"
	"slices"
)

// never is the next use of a block no later lookup needs before the block
// is offered again: keeping it is worth nothing.
const never = math.MaxInt32

// nextUses returns, for every entry of t.chain, the event of the block's
// next use after that event: the next lookup whose prompt holds the block,
// or never when a commit offers the block again first (it comes back for
// free) or nothing names it again.
func (t *Trace) nextUses() []int32 {
	next := make([]int32, len(t.chain))
	last := make([]int32, len(t.parent)) // the block's next use, from the events after the one at hand
	for i := range last {
		last[i] = never
	}
	for e := len(t.events) - 1; e >= 0; e-- {
		ev := t.events[e]
		for i := ev.start; i < ev.end; i++ {
			b := t.chain[i]
			next[i] = last[b]
			if ev.lookup {
				last[b] = int32(e)
			} else {
				last[b] = never
			}
		}
	}
	return next
}

// Infinite returns the hit tokens of a cache that never evicts: a lookup
// hits every leading whole block of its prompt that some earlier event
// named under the same salt.
func (t *Trace) Infinite() int {
	seen := make([]bool, len(t.parent))
	hits := 0
	for _, ev := range t.events {
		blocks := t.chain[ev.start:ev.end]
		if ev.lookup {
			hits += t.prefix(blocks, seen)
		}
		for _, b := range blocks {
			seen[b] = true
		}
	}
	return hits * t.blockSize
}

// prefix returns how many leading blocks are in.
func (t *Trace) prefix(blocks []int32, in []bool) int {
	n := 0
	for n < len(blocks) && in[blocks[n]] {
		n++
	}
	return n
}

// Optimal returns the most hit tokens any cache of capacity blocks could
// have reached on the trace, under the model in the package comment. It
// runs the farthest-next-use rule, which the package comment proves
// optimal, in O(B log B) time for B = the blocks of all events.
func (t *Trace) Optimal(capacity int) int {
	hits, _ := t.farthest(capacity, false)
	return hits
}

// OptimalLeaves returns the hit tokens of the farthest-next-use rule
// restricted to leaves: a schedule of a tree, which never holds a block
// without its parent. The best a tree can do lies between it and Optimal;
// the rule is not that best (the package comment has a case).
func (t *Trace) OptimalLeaves(capacity int) int {
	hits, _ := t.farthest(capacity, true)
	return hits
}

// farthest runs the farthest-next-use rule at capacity: after each event
// the cache holds what it held and the event's blocks, less the blocks of
// farthest next use, deepest first among equals, until it holds capacity.
// With leaves, only a block none of whose children is cached may go.
// perBlock counts every cached block of a prompt, not just the leading
// ones: the two agree for the rule without leaves (a test checks it), which
// is what makes the bound of the package comment reachable.
func (t *Trace) farthest(capacity int, leaves bool) (hits, perBlock int) {
	if capacity <= 0 {
		return 0, 0
	}
	next := t.nextUses()
	in := make([]bool, len(t.parent))
	use := make([]int32, len(t.parent))  // a cached block's next use
	kids := make([]int32, len(t.parent)) // cached children, with leaves
	h := maxHeap{pushes: make([]uint32, len(t.parent))}
	valid := func(e entry) bool { return h.latest(e) && in[e.id] && (!leaves || kids[e.id] == 0) }
	size := 0
	for _, ev := range t.events {
		blocks := t.chain[ev.start:ev.end]
		if ev.lookup {
			hits += t.prefix(blocks, in)
			for _, b := range blocks {
				if in[b] {
					perBlock++
				}
			}
		}
		for j, b := range blocks {
			use[b] = next[int(ev.start)+j]
			if !in[b] {
				in[b] = true
				size++
				if leaves && j > 0 {
					kids[blocks[j-1]]++
				}
			}
		}
		for _, b := range blocks {
			if !leaves || kids[b] == 0 {
				h.push(entry{use: use[b], depth: t.depth[b], id: b})
			}
		}
		h.compact(size, valid)
		for size > capacity {
			e := h.pop()
			b := e.id
			if !valid(e) {
				continue // stale: evicted, used since, or no longer a leaf
			}
			in[b] = false
			size--
			if p := t.parent[b]; leaves && p >= 0 {
				if kids[p]--; kids[p] == 0 {
					h.push(entry{use: use[p], depth: t.depth[p], id: p})
				}
			}
		}
	}
	return hits * t.blockSize, perBlock * t.blockSize
}

// LRU returns the hit tokens of a cache of capacity blocks that evicts the
// least recently used leaf, as the tree designs do: a lookup makes the
// blocks it hits recent, a commit caches its blocks and makes them recent.
// It is a schedule of the model, so it never beats Optimal.
func (t *Trace) LRU(capacity int) int {
	if capacity <= 0 {
		return 0
	}
	in := make([]bool, len(t.parent))
	used := make([]int32, len(t.parent))
	kids := make([]int32, len(t.parent))
	h := maxHeap{pushes: make([]uint32, len(t.parent))} // keyed by -used: the least recent on top
	valid := func(e entry) bool { return h.latest(e) && in[e.id] && kids[e.id] == 0 }
	size, hits := 0, 0
	for e, ev := range t.events {
		blocks := t.chain[ev.start:ev.end]
		if ev.lookup {
			n := t.prefix(blocks, in)
			hits += n
			blocks = blocks[:n] // a lookup caches nothing
		}
		for j, b := range blocks {
			used[b] = int32(e)
			if !in[b] {
				in[b] = true
				size++
				if j > 0 {
					kids[blocks[j-1]]++
				}
			}
		}
		for _, b := range blocks {
			if kids[b] == 0 {
				h.push(entry{use: -used[b], id: b})
			}
		}
		h.compact(size, valid)
		for size > capacity {
			x := h.pop()
			b := x.id
			if !valid(x) {
				continue
			}
			in[b] = false
			size--
			if p := t.parent[b]; p >= 0 {
				if kids[p]--; kids[p] == 0 {
					h.push(entry{use: -used[p], id: p})
				}
			}
		}
	}
	return hits * t.blockSize
}

// entry is a candidate for eviction: the largest use goes first, then the
// deepest. A block's entry goes stale when it is pushed again (its use
// changed) or leaves the candidates; the caller tells which are valid.
type entry struct {
	use, depth int32
	id         int32
	push       uint32 // which of the block's pushes this is
}

func (a entry) above(b entry) bool {
	if a.use != b.use {
		return a.use > b.use
	}
	return a.depth > b.depth
}

// maxHeap holds entries, stale ones among them: dropping an entry when its
// block changes would need its position, and skipping it when it comes to
// the top costs no more.
type maxHeap struct {
	s      []entry
	pushes []uint32 // per block: pushes so far
}

// latest reports whether e is its block's newest entry.
func (h *maxHeap) latest(e entry) bool { return h.pushes[e.id] == e.push }

// compact drops the stale entries once they outnumber the live ones
// (there are at most size of those, one per candidate), so the heap stays
// the cache's size, not the run's, at O(1) amortized per push.
func (h *maxHeap) compact(size int, valid func(entry) bool) {
	if len(h.s) <= 2*size+1024 {
		return
	}
	h.s = slices.DeleteFunc(h.s, func(e entry) bool { return !valid(e) })
	for i := len(h.s)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *maxHeap) push(e entry) {
	h.pushes[e.id]++
	e.push = h.pushes[e.id]
	h.s = append(h.s, e)
	s := h.s
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].above(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *maxHeap) pop() entry {
	s := h.s
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	h.s = s[:n]
	h.down(0)
	return top
}

func (h *maxHeap) down(i int) {
	s := h.s
	n := len(s)
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s[l].above(s[m]) {
			m = l
		}
		if r < n && s[r].above(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
}

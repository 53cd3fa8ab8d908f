package bound

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// brute returns the most hit tokens of any schedule on t at capacity: after
// each event, every subset of what the cache held and the event's blocks
// that fits, closed under parents when tree is set, by exhaustive search.
func brute(t *Trace, capacity int, tree bool) int {
	n := len(t.parent)
	if n > 20 {
		panic("brute: too many blocks")
	}
	masks := make([]uint32, len(t.events))
	for e, ev := range t.events {
		for _, b := range t.chain[ev.start:ev.end] {
			masks[e] |= 1 << b
		}
	}
	closed := func(s uint32) bool {
		for r := s; r != 0; r &= r - 1 {
			b := bits.TrailingZeros32(r)
			if p := t.parent[b]; p >= 0 && s&(1<<p) == 0 {
				return false
			}
		}
		return true
	}
	memo := map[uint64]int{}
	var best func(e int, s uint32) int
	best = func(e int, s uint32) int {
		if e == len(t.events) {
			return 0
		}
		key := uint64(e)<<32 | uint64(s)
		if v, ok := memo[key]; ok {
			return v
		}
		ev := t.events[e]
		gain := 0
		if ev.lookup {
			for _, b := range t.chain[ev.start:ev.end] {
				if s&(1<<b) == 0 {
					break
				}
				gain++
			}
		}
		cand := s | masks[e]
		top := 0
		for sub := cand; ; sub = (sub - 1) & cand {
			if bits.OnesCount32(sub) <= capacity && (!tree || closed(sub)) {
				top = max(top, best(e+1, sub))
			}
			if sub == 0 {
				break
			}
		}
		memo[key] = gain + top
		return gain + top
	}
	return best(0, 0) * t.blockSize
}

// randomTrace builds a small trace: prompts over a two-token alphabet under
// up to three salts, so that chains share prefixes often. Served one after
// another (each lookup then its commit, output included), or as events in
// any order, as a run of concurrent requests records them.
func randomTrace(r *rand.Rand, serial bool) *Trace {
	bs := 1 + r.IntN(2)
	t := NewTrace(bs)
	salts := []string{"", "a", "b"}[:1+r.IntN(3)]
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(2))
		}
		return out
	}
	events := 2 + r.IntN(7)
	for range events {
		salt := salts[r.IntN(len(salts))]
		p := tokens(r.IntN(4*bs + 1))
		if serial {
			t.Lookup(salt, p)
			t.Commit(salt, append(p, tokens(r.IntN(2*bs+1))...))
			continue
		}
		if r.IntN(2) == 0 {
			t.Lookup(salt, p)
		} else {
			t.Commit(salt, p)
		}
	}
	return t
}

func TestFarthestNextUseIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for cases < 3000 {
		tr := randomTrace(r, cases%2 == 0)
		if len(tr.parent) > 12 {
			continue
		}
		cases++
		for c := 1; c <= 4; c++ {
			want := brute(tr, c, false)
			got, perBlock := tr.farthest(c, false)
			if got != want || perBlock != got {
				t.Fatalf("case %d capacity %d: farthest %d (per block %d), brute force %d", cases, c, got, perBlock, want)
			}
		}
	}
}

// The best schedule that keeps parents, against the leaves' rule below
// and the best of all above, on small random traces.
func TestTreesLieBetweenTheTwoRules(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases, below := 0, 0
	for cases < 3000 {
		tr := randomTrace(r, cases%2 == 0)
		if len(tr.parent) > 12 {
			continue
		}
		cases++
		for c := 1; c <= 4; c++ {
			leaves, tree, any := tr.OptimalLeaves(c), brute(tr, c, true), brute(tr, c, false)
			if leaves > tree || tree > any {
				t.Fatalf("case %d capacity %d: leaves %d, best tree %d, best of all %d", cases, c, leaves, tree, any)
			}
			if tree < any {
				below++
			}
		}
	}
	if below == 0 {
		t.Error("no case where keeping parents costs hits: the cases are too tame")
	}
}

// The case of the package comment: the leaves' rule keeps q,q for a
// lookup of q,q, but q comes back with a commit before it, so keeping q,q
// costs two blocks; the best tree keeps w instead.
func TestLeavesRuleIsNotOptimalForTrees(t *testing.T) {
	const w, q, y = 1, 2, 3
	tr := NewTrace(1)
	tr.Lookup("", []int32{w})
	tr.Commit("", []int32{q, q})
	tr.Commit("", []int32{y})
	tr.Lookup("", []int32{y})
	tr.Commit("", []int32{q})
	tr.Lookup("", []int32{q, q})
	tr.Lookup("", []int32{w})
	leaves, tree, opt := tr.OptimalLeaves(2), brute(tr, 2, true), tr.Optimal(2)
	if leaves != 2 || tree != 3 || opt != 3 {
		t.Errorf("leaves %d, best tree %d, optimal %d; want 2, 3, 3", leaves, tree, opt)
	}
}

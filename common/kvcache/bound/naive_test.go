package bound

import (
	"math/rand/v2"
	"testing"
)

// naive runs the same rules as farthest and LRU by scanning every cached
// block for each eviction: no heap, no stale entries.
func naive(t *Trace, capacity int, rule string) int {
	next := t.nextUses()
	in := make([]bool, len(t.parent))
	use := make([]int32, len(t.parent))
	var cached []int32
	hits := 0
	leaf := func(b int32) bool {
		for _, c := range cached {
			if t.parent[c] == b {
				return false
			}
		}
		return true
	}
	for e, ev := range t.events {
		blocks := t.chain[ev.start:ev.end]
		if ev.lookup {
			n := t.prefix(blocks, in)
			hits += n
			if rule == "lru" {
				blocks = blocks[:n]
			}
		}
		for j, b := range blocks {
			if rule == "lru" {
				use[b] = -int32(e)
			} else {
				use[b] = next[int(ev.start)+j]
			}
			if !in[b] {
				in[b] = true
				cached = append(cached, b)
			}
		}
		for len(cached) > capacity {
			best := -1
			for i, b := range cached {
				if rule != "any" && !leaf(b) {
					continue
				}
				if best < 0 || (entry{use: use[b], depth: t.depth[b]}).above(entry{use: use[cached[best]], depth: t.depth[cached[best]]}) {
					best = i
				}
			}
			in[cached[best]] = false
			cached = append(cached[:best], cached[best+1:]...)
		}
	}
	return hits * t.blockSize
}

// Long traces, where most heap entries go stale and the heap compacts,
// against the scan.
func TestHeapAgreesWithAScan(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 20 {
		tr := NewTrace(2)
		var prompts [][]int32
		for range 1500 {
			var p []int32
			if len(prompts) > 0 && r.IntN(3) > 0 {
				q := prompts[r.IntN(len(prompts))]
				p = append(p, q[:r.IntN(len(q)+1)]...)
			}
			for range r.IntN(9) {
				p = append(p, int32(r.IntN(3)))
			}
			prompts = append(prompts, p)
			salt := []string{"", "a"}[r.IntN(2)]
			if r.IntN(2) == 0 {
				tr.Lookup(salt, p)
			} else {
				tr.Commit(salt, p)
			}
		}
		for _, c := range []int{1, 7, 40} {
			if got, want := tr.Optimal(c), naive(tr, c, "any"); got != want {
				t.Fatalf("capacity %d: optimal %d, scan %d", c, got, want)
			}
			if got, want := tr.OptimalLeaves(c), naive(tr, c, "leaves"); got != want {
				t.Fatalf("capacity %d: leaves %d, scan %d", c, got, want)
			}
			if got, want := tr.LRU(c), naive(tr, c, "lru"); got != want {
				t.Fatalf("capacity %d: LRU %d, scan %d", c, got, want)
			}
		}
	}
}

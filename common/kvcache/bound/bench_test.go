package bound_test

import (
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache/bound"
)

// run10k returns 10,000 requests shaped like the phase-8 workloads, at
// their full size: eight system prompts of 1,024 tokens, a question of
// 32 to 128 tokens and an answer of 32 to 128; three in ten are the next
// turn of an earlier conversation (its prompt, its answer, a new
// question). Each commits its prompt and its answer but the last token.
func run10k() []bound.Request {
	r := rand.New(rand.NewPCG(10, 10000))
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(32000))
		}
		return out
	}
	sys := make([][]int32, 8)
	for i := range sys {
		sys[i] = tokens(1024)
	}
	reqs := make([]bound.Request, 0, 10000)
	for range 10000 {
		var prompt []int32
		if len(reqs) > 0 && r.IntN(10) < 3 {
			prev := reqs[len(reqs)-1-r.IntN(min(len(reqs), 200))]
			prompt = append(prev.Commit[:len(prev.Commit):len(prev.Commit)], tokens(32+r.IntN(97))...)
		} else {
			prompt = append(sys[r.IntN(len(sys))][:1024:1024], tokens(32+r.IntN(97))...)
		}
		out := tokens(32 + r.IntN(97))
		reqs = append(reqs, bound.Request{Prompt: prompt, Commit: append(prompt[:len(prompt):len(prompt)], out[:len(out)-1]...)})
	}
	return reqs
}

// BenchmarkReport: recording the run (interning every block), then the
// optimum, the leaves' rule at the default pool's 1,024 blocks of 16
// tokens, and the infinite cache's hits.
func BenchmarkReport(b *testing.B) {
	reqs := run10k()
	b.ResetTimer()
	for b.Loop() {
		tr := bound.FromRequests(16, reqs)
		_ = tr.Report(1024, 0)
	}
}

// BenchmarkOptimal: the farthest-next-use rule alone, on the recorded run.
func BenchmarkOptimal(b *testing.B) {
	tr := bound.FromRequests(16, run10k())
	b.ResetTimer()
	for b.Loop() {
		_ = tr.Optimal(1024)
	}
}

// On a run shaped like the phase-8 workloads, trees lose nothing to the
// bound: the leaves' rule reaches the optimum, so the optimum is what a
// tree design could reach.
func TestTreesReachTheBound(t *testing.T) {
	tr := bound.FromRequests(16, run10k())
	for _, c := range []int{256, 1024} {
		if leaves, opt := tr.OptimalLeaves(c), tr.Optimal(c); leaves != opt {
			t.Errorf("%d blocks: leaves' rule %d, optimal %d", c, leaves, opt)
		}
		if lru, opt := tr.LRU(c), tr.Optimal(c); lru >= opt {
			t.Errorf("%d blocks: LRU %d, optimal %d: the run puts no pressure on the cache", c, lru, opt)
		}
	}
}

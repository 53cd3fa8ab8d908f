package main

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/model"
	"kvlab/phase08_prefix/radix"
)

// FuzzEngineMatchesBaseline serves random requests with shared prefixes,
// arriving over several steps, through an engine with the tree and a small
// pool (evictions, preemptions, failed admissions), with the ownership audit
// after every step. Every token and logit must equal the run without the
// cache. `go test` runs the seed corpus (and testdata/fuzz); `go test -fuzz
// FuzzEngine ./phase08_prefix` explores.
func FuzzEngineMatchesBaseline(f *testing.F) {
	f.Add(uint64(1), uint8(6), uint8(2), uint8(0), false)
	f.Add(uint64(2), uint8(8), uint8(0), uint8(3), true)
	f.Add(uint64(3), uint8(7), uint8(1), uint8(12), false)
	f.Add(uint64(4), uint8(5), uint8(3), uint8(1), true)
	f.Add(uint64(5), uint8(8), uint8(2), uint8(40), true)
	m := loadModel(f)
	f.Fuzz(func(t *testing.T, seed uint64, n, bsLog, spare uint8, costAware bool) {
		serveRandom(t, m, seed, n, bsLog, spare, costAware)
	})
}

// serveRandom is one run of FuzzEngineMatchesBaseline: up to 8 requests,
// block size 1, 2, 4 or 8, a pool that holds the longest request plus spare
// blocks.
func serveRandom(t *testing.T, m *model.Model, seed uint64, n, bsLog, spare uint8, costAware bool) {
	rng := rand.New(rand.NewPCG(seed, 99))
	bs := 1 << (bsLog % 4)
	systems := [][]int32{tokens(rng, rng.IntN(25)), tokens(rng, rng.IntN(25))}
	var reqs []engine.Request
	arrive := map[int]int{} // request id → the step it arrives at
	longest := 0
	for i := range 1 + int(n%8) {
		var prompt []int32
		if i > 0 && rng.IntN(4) == 0 { // the same prompt again: a full hit when block-aligned
			prompt = reqs[rng.IntN(i)].Prompt
		} else {
			sys := systems[rng.IntN(2)]
			prompt = join(sys[:rng.IntN(len(sys)+1)], tokens(rng, 1+rng.IntN(8)))
		}
		r := request(i, prompt, 1+rng.IntN(5))
		reqs = append(reqs, r)
		arrive[i] = rng.IntN(8)
		longest = max(longest, len(prompt)+r.MaxTokens)
	}
	c := config()
	c.BlockSize = bs
	c.NumBlocks = (longest+bs-1)/bs + int(spare%32)
	c.MaxBatchTokens = 4 + rng.IntN(29)
	// Watch checks, on every commit, that no earlier commit's prefix got
	// shorter and that lent prefixes stay matchable.
	c.PrefixCache = cachetest.Watch(t, radix.New)
	if costAware {
		c.Admission = engine.AdmitCostAware
	}
	want := run(t, m, baseline(c), reqs...)

	e := newEngine(t, m, c)
	have := map[int]*result{}
	for step := 0; step < 100_000 && (step < 8 || e.Busy()); step++ {
		for _, r := range reqs {
			if arrive[r.ID] == step {
				require.NoError(t, e.Submit(r))
				have[r.ID] = &result{}
			}
		}
		for _, o := range e.Step() {
			require.NoError(t, o.Err, "request %d", o.ID)
			have[o.ID].tokens = append(have[o.ID].tokens, o.Token)
			have[o.ID].logits = append(have[o.ID].logits, o.Logits)
		}
	}
	requireSame(t, have, want)
}

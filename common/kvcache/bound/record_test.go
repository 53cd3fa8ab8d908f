package bound_test

import (
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/bound"
	"kvlab/common/kvcache/cachetest"
	"kvlab/kernels/cpu"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

var designs = []struct {
	name string
	f    cachetest.Factory
}{
	{"radix", radix.New},
	{"blockhash", func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs) }},
	{"trie", func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return trie.New(a, bs, nil) }},
	{"trie LRU", trie.WithPolicy(trie.LRU)},
}

// Every design, driven the way an engine drives it (concurrent sequences,
// chunked commits, forks, evictions, salts), hits no more than the bound at
// its pool's capacity.
func TestRecorderBoundsEveryDesign(t *testing.T) {
	inputs := cachetest.OpsSeeds()
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		in := make([]byte, 256+r.IntN(257))
		for i := range in {
			in[i] = byte(r.IntN(256))
		}
		inputs = append(inputs, in)
	}
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			hit, belowOptimal := 0, 0
			for i, in := range inputs {
				rec := bound.NewRecorder()
				cachetest.Ops(t, rec.Wrap(d.f), in)
				tr := rec.Trace()
				c := rec.Capacity()
				got, opt, inf := rec.Achieved(), tr.Optimal(c), tr.Infinite()
				if got > opt || opt > inf {
					t.Fatalf("input %d: achieved %d, optimal %d, infinite %d at %d blocks", i, got, opt, inf, c)
				}
				if lru, leaves := tr.LRU(c), tr.OptimalLeaves(c); lru > leaves || leaves > opt {
					t.Fatalf("input %d: LRU %d, leaves %d, optimal %d", i, lru, leaves, opt)
				}
				if got > 0 {
					hit++
				}
				if got < opt {
					belowOptimal++
				}
			}
			if hit < len(inputs)/3 || belowOptimal == 0 {
				t.Errorf("%d of %d inputs hit, %d below the optimum: the inputs do not exercise the bound", hit, len(inputs), belowOptimal)
			}
		})
	}
}

// Served one after another, the second request's output takes room from
// its arrival on; run as the engine runs it, its commit comes after the
// third request has hit, and the cache can keep both. So a concurrent run
// can beat FromRequests's optimum, and not the recorded trace's.
func TestServedOneAfterAnotherIsNoBoundForOverlaps(t *testing.T) {
	const y, p, x = 5, 6, 7
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			rec := bound.NewRecorder()
			pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: 2, BlockSize: 1, NewCache: rec.Wrap(d.f)})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			step := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			run := func(id int, prompt []int32) {
				_, err := pool.Open(id, "", prompt)
				step(err)
				step(pool.Grow(id, len(prompt)))
				pool.Commit(id, prompt)
			}
			run(0, []int32{y})
			pool.Release(0)
			run(1, []int32{p}) // and it goes on decoding
			run(2, []int32{y}) // hits y
			pool.Release(2)
			step(pool.Grow(1, 2)) // the first's output needs y's block
			pool.Commit(1, []int32{p, x})
			pool.Release(1)
			run(3, []int32{p, x}) // hits p, x
			pool.Release(3)

			serial := bound.FromRequests(1, []bound.Request{
				{Prompt: []int32{y}},
				{Prompt: []int32{p}, Commit: []int32{p, x}},
				{Prompt: []int32{y}},
				{Prompt: []int32{p, x}},
			})
			got, opt, serialOpt := rec.Achieved(), rec.Trace().Optimal(2), serial.Optimal(2)
			if got != 3 || opt != 3 || serialOpt != 2 {
				t.Errorf("achieved %d, recorded optimum %d, served one after another %d; want 3, 3, 2", got, opt, serialOpt)
			}
		})
	}
}

// A sequence matched again after a preemption finds its own KV: the engine
// does not count that as a hit, and neither does the recorder.
func TestRecorderCountsASequencesFirstLookupOnly(t *testing.T) {
	rec := bound.NewRecorder()
	pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: 8, BlockSize: 2, NewCache: rec.Wrap(radix.New)})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	prompt := []int32{1, 2, 3, 4, 5}
	for range 2 { // admitted, computed and committed, preempted, admitted again
		if _, err := pool.Open(1, "", prompt); err != nil {
			t.Fatal(err)
		}
		if err := pool.Grow(1, len(prompt)); err != nil {
			t.Fatal(err)
		}
		pool.Commit(1, prompt)
		pool.Release(1)
	}
	if _, err := pool.Open(2, "", prompt); err != nil {
		t.Fatal(err)
	}
	tr := rec.Trace()
	if rec.Achieved() != 4 || tr.Lookups() != 2 || tr.PromptTokens() != 10 {
		t.Errorf("achieved %d in %d lookups of %d tokens; want 4 (the second sequence's) in 2 of 10", rec.Achieved(), tr.Lookups(), tr.PromptTokens())
	}
	if r := rec.Report(); r.Capacity != 8 || r.BlockSize != 2 || r.Optimal != 4 || r.Infinite != 4 {
		t.Errorf("report %+v", r)
	}
}

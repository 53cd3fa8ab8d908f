package main

import (
	"testing"

	"kvlab/common/engine"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_hashcow/blockhash"
)

// FuzzEngine serves random requests drawn from a few shared prefixes through
// the engine with the cache, and requires the outputs of the engine without
// it, bit for bit, with block ownership audited after every step and the
// cache's invariants (cachetest.Watch) checked on every call into it. The input
// picks the block size, the pool size (from roomy down to a pool that must
// evict and preempt), the step budget, the arrival gap and every request.
// Plain `go test` runs the seed corpus; `go test -fuzz FuzzEngine` explores.
func FuzzEngine(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 0, 0, 0},
		{2, 255, 3, 1, 9, 30, 0, 4, 17, 5, 1, 12, 200, 33, 2},
		{1, 10, 2, 3, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
		{3, 0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		{2, 40, 4, 2, 250, 1, 250, 2, 250, 3, 250, 4, 250, 5},
		{0, 128, 0, 5, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90},
	} {
		f.Add(seed)
	}
	m := loadModel(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		c := testConfig()
		c.BlockSize = 1 << (in.next() % 4) // 1, 2, 4 or 8
		c.MaxBatchTokens = 4 + in.next()%29
		c.MaxRunning = min(c.MaxRunning, c.MaxBatchTokens)
		if in.next()%2 == 1 {
			c.Admission = engine.AdmitCostAware
		}
		gap := in.next() % 4

		prefixes := [][]int32{tokens(0, 24), tokens(100, 17), tokens(300, 9)}
		var reqs []engine.Request
		biggest := 0
		for id := range 1 + in.next()%6 {
			p := prefixes[in.next()%len(prefixes)]
			prompt := append([]int32(nil), p[:in.next()%(len(p)+1)]...)
			for range in.next() % 6 {
				prompt = append(prompt, int32(in.next()%512))
			}
			if len(prompt) == 0 {
				prompt = []int32{int32(id)}
			}
			r := engine.Request{ID: id, Prompt: prompt, MaxTokens: 1 + in.next()%6, IgnoreEOS: true, KeepLogits: true}
			if in.next()%3 == 0 {
				r.Sampling = engine.Sampling{Temperature: 1, Seed: uint64(id)}
				r.N = 1 + in.next()%3
			}
			reqs = append(reqs, r)
			blocks := (len(prompt) + r.MaxTokens + c.BlockSize - 1) / c.BlockSize
			biggest = max(biggest, blocks)
		}
		// From enough for the largest request alone up to room for all.
		c.NumBlocks = biggest + 1 + in.next()%(len(reqs)*biggest+1)
		// Forked samples in a pool that cannot hold them all are part of
		// the test: the engine takes each copy-on-write block while it
		// schedules, so preemption can make room for it (see
		// TestPitfallCopyOnWriteNeedsAFreeBlock).

		want := baseline(t, m, c, reqs)
		have, _ := serve(t, m, cached(c, cachetest.Watch(t, blockhash.PrefixCache)), reqs, gap)
		requireSame(t, have, want)
	})
}

// fuzzInput reads the fuzzer's bytes as small numbers, then zeros.
type fuzzInput []byte

func (in *fuzzInput) next() int {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return int(b)
}

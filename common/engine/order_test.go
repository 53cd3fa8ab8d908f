package engine

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/phase08_prefix/radix"
)

// keysOf lists the sequences' keys, in order.
func keysOf(seqs []*sequence) []int {
	keys := make([]int, len(seqs))
	for i, s := range seqs {
		keys[i] = s.key
	}
	return keys
}

func TestAdmissionOrderLongestPrefixFirst(t *testing.T) {
	// Five requests, submitted in key order at step 10; the cache holds
	// 0, 64, 16, 64 and 0 tokens of their prompts.
	matched := map[int]int{1: 0, 2: 64, 3: 16, 4: 64, 5: 0}
	var waiting []*sequence
	for k := 1; k <= 5; k++ {
		waiting = append(waiting, &sequence{key: k, queued: 10})
	}
	match := func(s *sequence) int { return matched[s.key] }

	got := admissionOrder(waiting, match, 12, 0)
	// Longest match first; equal matches (2 and 4, 1 and 5) oldest first.
	require.Equal(t, []int{2, 4, 3, 1, 5}, keysOf(got))
}

func TestAdmissionOrderStarvationGuard(t *testing.T) {
	// Request 1 was submitted at step 0 and its prefix is never cached;
	// the others came later with cached prefixes.
	matched := map[int]int{1: 0, 2: 32, 3: 48}
	waiting := []*sequence{{key: 1, queued: 0}, {key: 2, queued: 5}, {key: 3, queued: 6}}
	match := func(s *sequence) int { return matched[s.key] }

	// Without the guard it stays last however long it waits.
	require.Equal(t, []int{3, 2, 1}, keysOf(admissionOrder(waiting, match, 1000, 0)))
	// With a guard of 8 steps: at step 7 it has waited 7, still last.
	require.Equal(t, []int{3, 2, 1}, keysOf(admissionOrder(waiting, match, 7, 8)))
	// At step 8 it has waited 8 and goes first.
	require.Equal(t, []int{1, 3, 2}, keysOf(admissionOrder(waiting, match, 8, 8)))
	// At step 14 request 2 has waited 9 too: both starved, oldest first,
	// then the rest by prefix.
	require.Equal(t, []int{1, 2, 3}, keysOf(admissionOrder(waiting, match, 14, 8)))
	// A preempted request goes before even a starved one.
	waiting = append(waiting, &sequence{key: 4, queued: 9, preempted: 1})
	require.Equal(t, []int{4, 1, 2, 3}, keysOf(admissionOrder(waiting, match, 14, 8)))
}

// firstTokenOrder runs reqs on a fresh engine that admits one request at
// a time and returns the request ids in the order of their first tokens.
func firstTokenOrder(t *testing.T, c Config, reqs []Request) []int {
	m := loadTestModel(t, "llama")
	c.PrefixCache = radix.PrefixCache
	c.MaxRunning = 1
	e := newTestEngine(t, m, c)
	for _, r := range reqs {
		require.NoError(t, e.Submit(r))
	}
	var order []int
	seen := map[int]bool{}
	for e.Busy() {
		for _, o := range e.Step() {
			require.NoError(t, o.Err)
			if !seen[o.ID] {
				seen[o.ID] = true
				order = append(order, o.ID)
			}
		}
	}
	return order
}

func TestLongestPrefixFirstAdmitsTheCachedPrefixFirst(t *testing.T) {
	// Request 0 runs alone and leaves its 24-token prefix in the cache.
	// Request 1 shares nothing with it; request 2 shares the prefix.
	shared := make([]int32, 24)
	for j := range shared {
		shared[j] = int32(3 + j*7%50)
	}
	other := make([]int32, 24)
	for j := range other {
		other[j] = int32(60 + j*5%40)
	}
	reqs := []Request{
		{ID: 0, Prompt: append(slices.Clone(shared), 101, 102), MaxTokens: 4, IgnoreEOS: true},
		{ID: 1, Prompt: append(slices.Clone(other), 103, 104), MaxTokens: 4, IgnoreEOS: true},
		{ID: 2, Prompt: append(slices.Clone(shared), 105, 106), MaxTokens: 4, IgnoreEOS: true},
	}
	fcfs := testConfig()
	require.Equal(t, []int{0, 1, 2}, firstTokenOrder(t, fcfs, reqs))
	lpf := fcfs
	lpf.Order = OrderLongestPrefix
	require.Equal(t, []int{0, 2, 1}, firstTokenOrder(t, lpf, reqs))
	// A guard shorter than request 0's run: both waited past it, so
	// arrival order again.
	lpf.MaxWaitSteps = 1
	require.Equal(t, []int{0, 1, 2}, firstTokenOrder(t, lpf, reqs))
}

func TestLongestPrefixFirstServesTheSameTokens(t *testing.T) {
	// The order changes when requests run, never what they generate:
	// batch-invariant kernels make every output independent of its batch.
	m := loadTestModel(t, "llama")
	reqs := orderTestRequests(m.Config.VocabSize)
	fcfs := testConfig()
	fcfs.PrefixCache = radix.PrefixCache
	fcfs.MaxBatchTokens = 32
	want := newTestEngine(t, m, fcfs).RunAll(reqs)
	lpf := fcfs
	lpf.Order, lpf.MaxWaitSteps = OrderLongestPrefix, 4
	got := newTestEngine(t, m, lpf).RunAll(reqs)
	for _, r := range reqs {
		require.NoError(t, got[r.ID].Err)
		require.Equal(t, want[r.ID].Tokens, got[r.ID].Tokens, "request %d", r.ID)
	}
}

// orderTestRequests is a queue of requests over two 24-token prefixes.
func orderTestRequests(vocab int) []Request {
	var reqs []Request
	for i := range 8 {
		p := make([]int32, 0, 32)
		for j := range 24 {
			p = append(p, int32((i%2*97+j*7)%vocab))
		}
		for j := range 4 + i {
			p = append(p, int32((1000+i*31+j)%vocab))
		}
		reqs = append(reqs, Request{ID: i, Prompt: p, MaxTokens: 4, IgnoreEOS: true})
	}
	return reqs
}

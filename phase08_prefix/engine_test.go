package main

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// sharedPrefixRequests returns n requests whose prompts start with one of
// three system prompts (one of them empty) and end with a unique suffix.
func sharedPrefixRequests(rng *rand.Rand, n int) []engine.Request {
	systems := [][]int32{tokens(rng, 37), tokens(rng, 16), nil}
	var reqs []engine.Request
	for i := range n {
		sys := systems[rng.IntN(len(systems))]
		prompt := join(sys, tokens(rng, 1+rng.IntN(12)))
		reqs = append(reqs, request(i, prompt, 1+rng.IntN(8)))
	}
	return reqs
}

// TestCacheMatchesBaseline serves the same requests with and without the
// tree: every token and every logit must be the same. Served one after
// another, each request must also find exactly the longest block-aligned
// prefix that an earlier one left in the tree (its prompt and output), and
// prefill must start there.
func TestCacheMatchesBaseline(t *testing.T) {
	m := loadModel(t)
	reqs := sharedPrefixRequests(rand.New(rand.NewPCG(1, 2)), 12)
	for _, bs := range []int{1, 4, 16} {
		c := config()
		c.BlockSize = bs
		c.NumBlocks = 1024 / bs
		want := run(t, m, baseline(c), reqs...)

		t.Run(fmt.Sprintf("bs=%d/all at once", bs), func(t *testing.T) {
			requireSame(t, run(t, m, c, reqs...), want)
		})
		t.Run(fmt.Sprintf("bs=%d/one after another", bs), func(t *testing.T) {
			e := newEngine(t, m, c)
			var committed [][]int32 // what each finished request left in the tree
			var prefill int
			for _, r := range reqs {
				res := serve(t, e, 10_000, r)[r.ID]
				requireSame(t, map[int]*result{r.ID: res}, map[int]*result{r.ID: want[r.ID]})
				best := 0
				for _, c := range committed {
					best = max(best, commonPrefix(c, r.Prompt)/bs*bs)
				}
				if res.cached != best {
					t.Fatalf("request %d: cached %d tokens; want %d, the longest block-aligned prefix served before", r.ID, res.cached, best)
				}
				prefill += len(r.Prompt) - min(res.cached, len(r.Prompt)-1)
				committed = append(committed, join(r.Prompt, res.tokens[:len(res.tokens)-1]))
			}
			if have := e.Stats().PrefillTokens; have != prefill {
				t.Fatalf("prefill tokens: have %d; want %d (each prompt from its cached length on)", have, prefill)
			}
		})
	}
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestTwoRequestsSharingAPrefix(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(3, 4))
	system := tokens(rng, 12)
	a := request(1, join(system, tokens(rng, 5)), 6)
	b := request(2, join(system, tokens(rng, 3)), 6)
	want := run(t, m, baseline(config()), a, b)

	e := newEngine(t, m, config())
	ra := serve(t, e, 1000, a)
	before := e.Stats().PrefillTokens
	rb := serve(t, e, 1000, b)
	requireSame(t, map[int]*result{1: ra[1], 2: rb[2]}, want)
	if rb[2].cached != 12 {
		t.Fatalf("second request: cached %d tokens; want 12", rb[2].cached)
	}
	if have := e.Stats().PrefillTokens - before; have != len(b.Prompt)-12 {
		t.Fatalf("second request: prefilled %d tokens; want %d", have, len(b.Prompt)-12)
	}
}

// A block-aligned prompt found whole in the tree still needs the logits of
// its last position: the engine runs that one token again, reading all of
// its KV from the cache, and must not write it into the shared block. The
// test plants a marker in that slot and checks it survives.
func TestFullyCachedPromptRunsOneTokenAndKeepsTheSharedBlock(t *testing.T) {
	m := loadModel(t)
	prompt := tokens(rand.New(rand.NewPCG(5, 6)), 16)
	c := config()
	want := run(t, m, baseline(c), request(2, prompt, 4))

	e := newEngine(t, m, c)
	serve(t, e, 1000, request(1, prompt, 1))
	before := e.Stats().PrefillTokens
	have := serve(t, e, 1000, request(2, prompt, 4))
	requireSame(t, have, want)
	t.Logf("a prompt found whole (%d of 16 tokens cached) prefills %d token; output bit-identical to the uncached run", have[2].cached, e.Stats().PrefillTokens-before)
	if have[2].cached != 16 || e.Stats().PrefillTokens-before != 1 {
		t.Fatalf("cached %d, prefilled %d; want 16, 1", have[2].cached, e.Stats().PrefillTokens-before)
	}

	// Again, with a marker in the last slot of the cached prompt.
	tree := e.Pool().Cache().(*radix.Tree)
	blocks, _ := tree.Match(-1, "", prompt)
	last := blocks[3]*4 + 3
	tree.Release(-1)
	const marker = 12345
	for l := range m.Config.NumHiddenLayers {
		k, v := e.Pool().Layer(l)
		cpu.Data(k)[int(last)*k.Cols()] = marker
		cpu.Data(v)[int(last)*v.Cols()] = marker
	}
	serve(t, e, 1000, request(3, prompt, 4))
	for l := range m.Config.NumHiddenLayers {
		k, v := e.Pool().Layer(l)
		if hk, hv := cpu.Data(k)[int(last)*k.Cols()], cpu.Data(v)[int(last)*v.Cols()]; hk != marker || hv != marker {
			t.Fatalf("layer %d: the shared slot holds K %v, V %v; want the marker %v: the one-token pass wrote into a shared block", l, hk, hv, float32(marker))
		}
	}
	t.Logf("after a third fully cached request, the marker in the shared slot of all %d layers is intact: the one-token pass did not write into the shared block", m.Config.NumHiddenLayers)
}

func TestEvictionUnderMemoryPressure(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(7, 8))
	systems := [][]int32{tokens(rng, 24), tokens(rng, 24), tokens(rng, 24), tokens(rng, 24)}
	var reqs []engine.Request
	for i := range 16 {
		reqs = append(reqs, request(i, join(systems[i%4], tokens(rng, 3)), 5))
	}
	c := config()
	c.NumBlocks = 24 // room for about two prefixes' blocks next to a running request
	want := run(t, m, baseline(c), reqs...)

	e := newEngine(t, m, c)
	have := map[int]*result{}
	for _, r := range reqs { // x, y, z, w, x, ...: more prefixes than the pool holds
		have[r.ID] = serve(t, e, 1000, r)[r.ID]
	}
	requireSame(t, have, want)
	if ev := e.Pool().Cache().Stats().Evicted; ev == 0 {
		t.Fatal("nothing was evicted; the test wants memory pressure")
	}
	// The most recently used prefix is still cached.
	last := serve(t, e, 1000, request(100, join(systems[3], tokens(rng, 2)), 2))[100]
	if last.cached != 24 {
		t.Fatalf("the most recently used prefix: cached %d; want 24", last.cached)
	}
}

// TestConfigValidation: a prefix cache needs chunked prefill (see
// TestPitfallWholePromptPrefillCannotSeeCachedPrefix for why).
func TestConfigValidation(t *testing.T) {
	m := loadModel(t)
	for _, tt := range []struct {
		name    string
		chunked bool
		cache   bool
		wantErr bool
	}{
		{"cache with chunked prefill", true, true, false},
		{"cache with whole-prompt prefill", false, true, true},
		{"no cache, whole-prompt prefill", false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := config()
			c.ChunkedPrefill = tt.chunked
			c.MaxBatchTokens = 4096
			c.MaxContext = 4096
			if !tt.cache {
				c.PrefixCache = nil
			}
			_, err := engine.New(m, c)
			t.Logf("chunked prefill %v, prefix cache %v: engine.New error: %v", tt.chunked, tt.cache, err)
			if (err != nil) != tt.wantErr {
				t.Fatalf("engine.New: have error %v; want error %v", err, tt.wantErr)
			}
			if err != nil {
				require.Contains(t, err.Error(), "chunked prefill")
			}
		})
	}
}

// TestVariantUsesTheTree checks the runnable's wiring: the engine the
// command line builds consults the radix tree.
func TestVariantUsesTheTree(t *testing.T) {
	m := loadModel(t)
	c := config()
	c.PrefixCache = variant.PrefixCache
	e := newEngine(t, m, c)
	if _, ok := e.Pool().Cache().(*radix.Tree); !ok {
		t.Fatalf("variant cache: have %T; want *radix.Tree", e.Pool().Cache())
	}
}

// A request that matched cached blocks and then ends where the whole pool
// is full (its output reaches the context limit, which is the pool's 32
// tokens) must leave none of them pinned.
func TestRequestAtThePoolsEndReleasesItsMatch(t *testing.T) {
	m := loadModel(t)
	rng := rand.New(rand.NewPCG(9, 10))
	system := tokens(rng, 16)
	c := config()
	c.NumBlocks = 8
	e := newEngine(t, m, c)
	serve(t, e, 100, request(1, system, 1))
	res := serve(t, e, 100, request(2, join(system, tokens(rng, 4)), 20))[2]
	if res.cached != 16 || res.err != nil || !res.done || len(res.tokens) != 12 {
		t.Fatalf("have cached %d, error %v, done %v, %d tokens; want 16, none, true and 12: 20 prompt tokens and 12 more fill 8 blocks of 4",
			res.cached, res.err, res.done, len(res.tokens))
	}
	tree := e.Pool().Cache().(*radix.Tree)
	if tree.Evictable() != tree.Cached() {
		t.Fatalf("after the failure: %d of %d cached blocks evictable; want all", tree.Evictable(), tree.Cached())
	}
	tree.Evict(tree.Cached())
	if free := e.Pool().Allocator().NumFree(); free != 8 {
		t.Fatalf("free blocks after evicting everything: have %d; want 8", free)
	}
}

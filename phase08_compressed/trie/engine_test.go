package trie

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/workload"
)

// loadModel returns the small synthetic model the engine tests run.
func loadModel(t testing.TB) *model.Model { return modeltest.Load(t, model.ArchLlama, 7) }

// cacheFactory builds the prefix cache an engine uses; nil is the baseline.
type cacheFactory = func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache

// trieCache is the library's trie with policy p.
func trieCache(p Policy) cacheFactory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return New(a, bs, p) }
}

// engineConfig is a small engine with the audit on: every step of every
// engine test checks block ownership, and panics on the first violation.
func engineConfig(bs, blocks int, cache cacheFactory) engine.Config {
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks = bs, blocks
	c.MaxBatchTokens, c.MaxRunning = 64, 16
	c.PrefixCache = cache
	if cache != nil {
		c.Admission = engine.AdmitCostAware
	}
	c.Audit = true
	return c
}

// outcome is what one request produced: its tokens, the logits each was
// sampled from, and the prompt tokens it found cached.
type outcome struct {
	Tokens []int32
	Logits [][]float32
	Cached int
}

// runStats is what an engine run did: the engine's counters and the
// blocks the cache evicted.
type runStats struct {
	engine.Stats
	Evicted int
}

// serve runs waves of requests through a fresh engine: every request of a
// wave is submitted at once, and a wave starts when the one before it has
// finished. It returns the outcome of every request and what the run did.
func serve(t *testing.T, c engine.Config, waves ...[]engine.Request) (map[int]*outcome, runStats) {
	t.Helper()
	return serveWith(t, c, nil, waves...)
}

// serveWith is serve with a hook called before each wave (numbered from 0)
// is submitted; nil for none.
func serveWith(t *testing.T, c engine.Config, hook func(e *engine.Engine, wave int), waves ...[]engine.Request) (map[int]*outcome, runStats) {
	t.Helper()
	e, err := engine.New(loadModel(t), c)
	require.NoError(t, err)
	defer e.Close()
	outs := map[int]*outcome{}
	for i, wave := range waves {
		if hook != nil {
			hook(e, i)
		}
		for _, r := range wave {
			r.KeepLogits = true
			require.NoError(t, e.Submit(r))
			outs[r.ID] = &outcome{}
		}
		drain(t, e, outs)
	}
	stats := runStats{Stats: e.Stats()}
	if c := e.Pool().Cache(); c != nil {
		stats.Evicted = c.Stats().Evicted
	}
	return outs, stats
}

// drain steps e until it is idle, recording every event in outs: under
// the request's ID for its first sample, under ID + 1000·i for sample i.
func drain(t *testing.T, e *engine.Engine, outs map[int]*outcome) {
	t.Helper()
	for e.Busy() {
		for _, o := range e.Step() {
			require.NoError(t, o.Err, "request %d", o.ID)
			key := o.ID + 1000*o.Sample
			if outs[key] == nil {
				outs[key] = &outcome{}
			}
			out := outs[key]
			out.Tokens = append(out.Tokens, o.Token)
			out.Logits = append(out.Logits, o.Logits)
			out.Cached = o.Cached
		}
	}
}

// sameOutput fails the test unless the two runs produced the same tokens
// and bit-identical logits for every request.
func sameOutput(t *testing.T, want, have map[int]*outcome) {
	t.Helper()
	ignoreCached := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Cached" }, cmp.Ignore())
	if diff := cmp.Diff(want, have, ignoreCached); diff != "" {
		t.Fatalf("output with the cache differs from the baseline (-baseline +cache):\n%s", diff)
	}
}

// promptsWithSharedPrefixes returns n requests whose prompts start with
// one of two system prompts of sys tokens, followed by 1–12 tokens of
// their own.
func promptsWithSharedPrefixes(n, sys, maxTokens int, seed uint64) []engine.Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	random := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(rng.IntN(512))
		}
		return out
	}
	systems := [][]int32{random(sys), random(sys)}
	reqs := make([]engine.Request, n)
	for i := range reqs {
		reqs[i] = engine.Request{ID: i, Prompt: cat(systems[i%2], random(1+rng.IntN(12))), MaxTokens: maxTokens}
	}
	return reqs
}

func TestEngineOutputMatchesBaseline(t *testing.T) {
	// Bit-exact tokens and logits with and without the cache, for several
	// block sizes, with room to spare (exact hit counts) and under
	// pressure (eviction and preemption), and for prompts found whole.
	reqs := promptsWithSharedPrefixes(10, 21, 6, 1)
	full := []engine.Request{{ID: 100, Prompt: toks(7, 16), MaxTokens: 4}}
	fullAgain := []engine.Request{{ID: 101, Prompt: toks(7, 16), MaxTokens: 4}}
	// Three seeded samples per request: forked after the prompt, sharing
	// its blocks, copying the partial last one on first write.
	var sampled []engine.Request
	for _, r := range reqs[:4] {
		r.N, r.Sampling = 3, engine.Sampling{Temperature: 0.8, Seed: uint64(r.ID)}
		sampled = append(sampled, r)
	}
	tests := []struct {
		name     string
		bs       int
		blocks   int
		pressure bool // the pool is small enough to evict and preempt
		waves    [][]engine.Request
	}{
		{"bs=1", 1, 512, false, [][]engine.Request{reqs[:2], reqs[2:]}},
		{"bs=2", 2, 256, false, [][]engine.Request{reqs[:2], reqs[2:]}},
		{"bs=4", 4, 128, false, [][]engine.Request{reqs[:2], reqs[2:]}},
		{"bs=16", 16, 32, false, [][]engine.Request{reqs[:2], reqs[2:]}},
		{"bs=4/pressure", 4, 20, true, [][]engine.Request{reqs[:2], reqs[2:]}},
		{"bs=4/one wave", 4, 128, false, [][]engine.Request{reqs}},
		{"bs=4/full hit", 4, 64, false, [][]engine.Request{full, fullAgain}},
		{"bs=4/three samples", 4, 128, false, [][]engine.Request{sampled[:1], sampled[1:]}},
	}
	for _, tc := range tests {
		base, _ := serve(t, engineConfig(tc.bs, tc.blocks, nil), tc.waves...)
		sequences := 0
		for _, w := range tc.waves {
			for _, r := range w {
				sequences += max(r.N, 1)
			}
		}
		require.Len(t, base, sequences, "%s: one outcome per sample", tc.name)
		for _, p := range policies {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				have, stats := serve(t, engineConfig(tc.bs, tc.blocks, trieCache(p.policy)), tc.waves...)
				sameOutput(t, base, have)
				if stats.CachedTokens == 0 {
					t.Fatalf("no prompt token came from the cache: the test would prove nothing")
				}
				if tc.pressure && (stats.Evicted == 0 || stats.Preemptions == 0) {
					t.Fatalf("under pressure: %d blocks evicted, %d preemptions; want both > 0", stats.Evicted, stats.Preemptions)
				}
			})
		}
	}
}

func TestEngineCachedTokensAreTheBlockAlignedOptimum(t *testing.T) {
	// With a roomy pool nothing is evicted, so every request of the second
	// wave must find exactly the longest block-aligned prefix of anything
	// the first wave committed: a prompt, or a prompt and its output.
	reqs := promptsWithSharedPrefixes(10, 21, 6, 2)
	for _, bs := range []int{1, 2, 4, 16} {
		t.Run(fmt.Sprintf("bs=%d", bs), func(t *testing.T) {
			first, second := reqs[:2], reqs[2:]
			outs, _ := serve(t, engineConfig(bs, 512/bs+64, trieCache(DeepestFirst)), first, second)
			var committed [][]int32
			for _, r := range first {
				out := outs[r.ID].Tokens
				committed = append(committed, cat(r.Prompt, out[:len(out)-1]))
			}
			for _, r := range second {
				want := 0
				for _, c := range committed {
					want = max(want, alignDown(commonPrefix(c, r.Prompt), bs))
				}
				if have := outs[r.ID].Cached; have != want {
					t.Fatalf("request %d: cached %d tokens; want %d", r.ID, have, want)
				}
			}
		})
	}
}

// conversation is one multi-turn run: every request's prompt and outcome.
type conversation struct {
	prompts map[int][]int32
	outs    map[int]*outcome
}

// converse runs the multi_turn workload one request at a time, building
// each follow-up's prompt from the previous turn's prompt and output, as a
// chat client does.
func converse(t *testing.T, c engine.Config, reqs []workload.Request) conversation {
	t.Helper()
	e, err := engine.New(loadModel(t), c)
	require.NoError(t, err)
	defer e.Close()
	conv := conversation{prompts: map[int][]int32{}, outs: map[int]*outcome{}}
	for _, r := range reqs {
		prompt := r.Prompt
		if f := r.FollowUp; f != nil {
			prompt = cat(conv.prompts[f.Prev], conv.outs[f.Prev].Tokens, f.UserTokens)
		}
		conv.prompts[r.ID] = prompt
		require.NoError(t, e.Submit(engine.Request{ID: r.ID, Prompt: prompt, MaxTokens: r.MaxTokens, KeepLogits: true}))
		conv.outs[r.ID] = &outcome{}
		drain(t, e, conv.outs)
	}
	return conv
}

// multiTurn returns a small multi_turn workload.
func multiTurn(t *testing.T) []workload.Request {
	t.Helper()
	p := workload.DefaultParams("multi_turn")
	p.Conversations, p.Turns = 3, 3
	p.PrefixLen, p.SuffixMin, p.SuffixMax = 18, 3, 9
	p.OutputMin, p.OutputMax = 4, 9
	p.Vocab = 512
	reqs, err := workload.Generate("multi_turn", p)
	require.NoError(t, err)
	return reqs
}

func TestMultiTurnReusesPromptAndOutput(t *testing.T) {
	// Turn k's prompt is turn k−1's prompt and output plus the user's new
	// tokens. The engine commits prompt and output (all but the newest
	// token, whose KV was never computed) when turn k−1 finishes, so turn
	// k must find all of it but a partial last block.
	const bs = 4
	reqs := multiTurn(t)
	for _, p := range policies {
		t.Run(p.name, func(t *testing.T) {
			conv := converse(t, engineConfig(bs, 256, trieCache(p.policy)), reqs)
			base := converse(t, engineConfig(bs, 256, nil), reqs)
			sameOutput(t, base.outs, conv.outs)
			var turns []string
			for _, r := range reqs {
				if r.FollowUp == nil {
					continue
				}
				prev := r.FollowUp.Prev
				want := alignDown(len(conv.prompts[prev])+len(conv.outs[prev].Tokens)-1, bs)
				turns = append(turns, fmt.Sprintf("%d/%d", conv.outs[r.ID].Cached, len(conv.prompts[r.ID])))
				if have := conv.outs[r.ID].Cached; have != want {
					t.Errorf("request %d (follow-up of %d): cached %d tokens; want %d (previous prompt %d + output %d − 1, rounded down to a block)",
						r.ID, prev, have, want, len(conv.prompts[prev]), len(conv.outs[prev].Tokens))
				}
			}
			t.Logf("follow-up turns, cached/prompt tokens: %s", strings.Join(turns, " "))
		})
	}
}

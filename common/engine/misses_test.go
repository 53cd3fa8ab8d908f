package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/misses"
	"kvlab/common/workload"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// missDesigns are the three prefix cache designs, by name.
var missDesigns = map[string]func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache{
	"radix": radix.PrefixCache, "blockhash": blockhash.PrefixCache, "trie": trie.PrefixCache,
}

// checkMisses runs reqs one after another and checks every request's
// reasons cover exactly its computed prompt tokens; it returns the totals
// and the last request's tokens.
func checkMisses(t *testing.T, e *Engine, reqs []Request) (tot misses.Reasons, last []int32) {
	t.Helper()
	for _, r := range reqs {
		res := e.RunAll([]Request{r})[r.ID]
		require.NoError(t, res.Err)
		last = res.Tokens
		m := res.Misses
		require.Equal(t, len(r.Prompt)-res.Cached, m.Cold+m.Evicted+m.Salt+m.Partial, "request %d: %+v", r.ID, m)
		tot.Add(m)
	}
	return tot, last
}

// TestEveryMissedPromptTokenHasAReason runs, on each design, prompts that
// must give each reason, and checks the reasons sum to the computed prompt
// tokens of every request and engine Stats agree.
func TestEveryMissedPromptTokenHasAReason(t *testing.T) {
	m := loadTestModel(t, "llama")
	vocab := m.Config.VocabSize
	for name, pc := range missDesigns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			c := testConfig()
			c.PrefixCache = pc
			c.NumBlocks = 24
			e := newTestEngine(t, m, c)
			p := randomPrompt(rng, 18, vocab) // 4 blocks and a tail of 2

			tot, _ := checkMisses(t, e, []Request{
				{ID: 1, Prompt: p, MaxTokens: 1},
				{ID: 2, Prompt: p, MaxTokens: 1},
				{ID: 3, Prompt: p, MaxTokens: 1, CacheSalt: "b"},
			})
			require.Equal(t, 16, tot.Cold)
			require.Equal(t, 16, tot.Salt)
			require.Equal(t, 6, tot.Partial)
			// Cache q once, fill the tiny pool with other prompts, then ask
			// for q again.
			q := randomPrompt(rng, 16, vocab)
			checkMisses(t, e, []Request{{ID: 5, Prompt: q, MaxTokens: 1}})
			var fill []Request
			for i := range 16 {
				fill = append(fill, Request{ID: 10 + i, Prompt: randomPrompt(rng, 64, vocab), MaxTokens: 1})
			}
			checkMisses(t, e, fill)
			again, _ := checkMisses(t, e, []Request{{ID: 4, Prompt: q, MaxTokens: 1}})
			if name == "trie" {
				// The trie's eviction policy keeps q's path here: q hits,
				// nothing to attribute.
				require.Zero(t, again.Total(), "%+v", again)
				return
			}
			require.Positive(t, again.Evicted, "%+v", again)
			require.Equal(t, e.Stats().Misses.Evicted, again.Evicted, "only q was evicted and asked for again")
		})
	}
}

// TestPreemptedTokensAreCountedAsRecompute runs more requests than a tiny
// pool holds, on each design, and checks recompute after preemption is
// counted, while the other reasons still sum to each request's computed
// prompt tokens.
func TestPreemptedTokensAreCountedAsRecompute(t *testing.T) {
	m := loadTestModel(t, "llama")
	for name, pc := range missDesigns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			var reqs []Request
			for i := range 8 {
				reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, 10+rng.IntN(10), m.Config.VocabSize), MaxTokens: 12, IgnoreEOS: true})
			}
			c := testConfig()
			c.PrefixCache = pc
			c.NumBlocks = 14
			e := newTestEngine(t, m, c)
			res := e.RunAll(reqs)
			require.Positive(t, e.Stats().Preemptions)
			var pre int
			for _, r := range reqs {
				mi := res[r.ID].Misses
				require.Equal(t, len(r.Prompt)-res[r.ID].Cached, mi.Cold+mi.Evicted+mi.Salt+mi.Partial, "request %d: %+v", r.ID, mi)
				pre += mi.Preempted
			}
			require.Positive(t, pre)
			require.Equal(t, e.Stats().Misses.Preempted, pre)
		})
	}
}

// TestEveryWorkloadsMissesAddUp runs each built-in workload's prompts on
// each design, then the same prompts for a second tenant, and checks every
// request's reasons sum to its computed prompt tokens, that suffixes not a
// multiple of the block size give partial, and that the second tenant's
// misses are salt, as the first tenant computed those blocks.
func TestEveryWorkloadsMissesAddUp(t *testing.T) {
	m := loadTestModel(t, "llama")
	for _, wl := range workload.Names() {
		p := workload.DefaultParams(wl)
		p.Requests, p.PrefixLen, p.SuffixMin, p.SuffixMax = 6, 16, 3, 9
		p.OutputMin, p.OutputMax = 2, 4
		p.Conversations, p.Turns, p.LongPrompts, p.LongLen = 2, 2, 1, 32
		wreqs, err := workload.Generate(wl, p)
		require.NoError(t, err, wl)
		for name, pc := range missDesigns {
			t.Run(wl+"/"+name, func(t *testing.T) {
				c := testConfig()
				c.PrefixCache = pc
				e := newTestEngine(t, m, c)
				// A follow-up resends the previous turn's prompt and answer.
				prompts := map[int][]int32{}
				var first misses.Reasons
				var again []Request
				for _, r := range wreqs {
					prompt := r.Prompt
					if f := r.FollowUp; f != nil {
						prompt = append(slices.Clone(prompts[f.Prev]), f.UserTokens...)
					}
					req := Request{ID: r.ID, Prompt: prompt, MaxTokens: r.MaxTokens, IgnoreEOS: true}
					m, out := checkMisses(t, e, []Request{req})
					first.Add(m)
					prompts[r.ID] = append(slices.Clone(prompt), out...)
					req.ID, req.CacheSalt = len(wreqs)+r.ID, "t2"
					again = append(again, req)
				}
				require.Positive(t, first.Cold, "%+v", first)
				require.Positive(t, first.Partial, "%+v", first)
				second, _ := checkMisses(t, e, again)
				require.Positive(t, second.Salt, "%+v", second)
				require.Zero(t, second.Cold, "every block was computed by the first tenant: %+v", second)
			})
		}
	}
}

// TestEvictedMissNamesItsEviction runs, on each design, a prompt A, then a
// prompt B so long that the pool must evict A's blocks to hold it, then A's
// prompt again as C: C's evicted tokens name B as the request whose
// admission or growth evicted them, at a step while B ran.
func TestEvictedMissNamesItsEviction(t *testing.T) {
	m := loadTestModel(t, "llama")
	vocab := m.Config.VocabSize
	for name, pc := range missDesigns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			c := testConfig()
			c.PrefixCache = pc
			c.NumBlocks = 24 // 96 tokens
			e := newTestEngine(t, m, c)
			a := randomPrompt(rng, 40, vocab) // 10 blocks
			b := randomPrompt(rng, 84, vocab) // 21 blocks: 7 more than the pool has free
			checkMisses(t, e, []Request{{ID: 1, Prompt: a, MaxTokens: 1}})
			bStart := e.Stats().Steps
			checkMisses(t, e, []Request{{ID: 2, Prompt: b, MaxTokens: 2}})
			bEnd := e.Stats().Steps
			got, _ := checkMisses(t, e, []Request{{ID: 3, Prompt: a, MaxTokens: 1}})
			t.Logf("%s: C missed %+v; B ran steps %d..%d", name, got, bStart+1, bEnd)
			require.Positive(t, got.Evicted, "%+v", got)
			require.Equal(t, 2, got.EvictedBy, "B evicted A's blocks: %+v", got)
			require.Greater(t, got.EvictedAt, int64(bStart), "%+v", got)
			require.LessOrEqual(t, got.EvictedAt, int64(bEnd), "%+v", got)
		})
	}
}

// TestEvictedFollowUpNamesItsEviction runs, on each design, a request A
// whose output fills whole blocks, then a prompt B that needs the whole
// pool but one block, then a follow-up C that resends A's prompt and
// answer: every block of A's that B evicted, output included, counts as
// evicted by B, and only the block past A's computed tokens is cold.
func TestEvictedFollowUpNamesItsEviction(t *testing.T) {
	m := loadTestModel(t, "llama")
	vocab := m.Config.VocabSize
	for name, pc := range missDesigns {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			c := testConfig()
			c.PrefixCache = pc
			c.NumBlocks = 24
			e := newTestEngine(t, m, c)
			a := randomPrompt(rng, 16, vocab)
			resA := e.RunAll([]Request{{ID: 1, Prompt: a, MaxTokens: 9, IgnoreEOS: true}})[1]
			require.NoError(t, resA.Err)
			// A computed 24 tokens: 4 prompt blocks and 2 of output.
			// B holds 23 blocks of 24: five of A's six go.
			checkMisses(t, e, []Request{{ID: 2, Prompt: randomPrompt(rng, 92, vocab), MaxTokens: 1}})
			follow := append(append(slices.Clone(a), resA.Tokens...), randomPrompt(rng, 3, vocab)...)
			got, _ := checkMisses(t, e, []Request{{ID: 3, Prompt: follow, MaxTokens: 1}})
			t.Logf("%s: follow-up missed %+v", name, got)
			require.Equal(t, 20, got.Evicted, "A's last three prompt blocks and both output blocks: %+v", got)
			require.Equal(t, 4, got.Cold, "the block holding A's last token, never computed: %+v", got)
			require.Equal(t, 2, got.EvictedBy, "%+v", got)
		})
	}
}

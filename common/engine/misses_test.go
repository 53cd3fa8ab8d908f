package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/misses"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// missDesigns are the three prefix cache designs, by name.
var missDesigns = map[string]func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache{
	"radix": radix.PrefixCache, "blockhash": blockhash.PrefixCache, "trie": trie.PrefixCache,
}

// checkMisses runs reqs one after another and checks every request's
// reasons cover exactly its computed prompt tokens; it returns the totals.
func checkMisses(t *testing.T, e *Engine, reqs []Request) misses.Reasons {
	t.Helper()
	var tot misses.Reasons
	for _, r := range reqs {
		res := e.RunAll([]Request{r})[r.ID]
		require.NoError(t, res.Err)
		m := res.Misses
		require.Equal(t, len(r.Prompt)-res.Cached, m.Cold+m.Evicted+m.Salt+m.Partial, "request %d: %+v", r.ID, m)
		tot.Add(m)
	}
	return tot
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

			tot := checkMisses(t, e, []Request{
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
			again := checkMisses(t, e, []Request{{ID: 4, Prompt: q, MaxTokens: 1}})
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

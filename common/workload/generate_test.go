package workload

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNames(t *testing.T) {
	want := []string{"chunked_prefill", "multi_turn", "no_shared_prefix", "prefix_caching", "routing", "system_prompts"}
	have := Names()
	assert.Equal(t, want, have, "have %v; want %v", have, want)
}

func TestGenerateUnknownListsNames(t *testing.T) {
	_, err := Generate("nope", DefaultParams("nope"))
	require.Error(t, err)
	for _, n := range Names() {
		assert.Contains(t, err.Error(), n)
	}
}

func TestGenerateValidates(t *testing.T) {
	p := DefaultParams("prefix_caching")
	p.RPS = 0
	_, err := Generate("prefix_caching", p)
	assert.ErrorContains(t, err, "-rps")
}

func TestGenerateIsDeterministic(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := DefaultParams(name)
			a := mustGenerate(t, name, p)
			b := mustGenerate(t, name, p)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("same seed, different workload (-first +second):\n%s", diff)
			}
			p.Seed++
			c := mustGenerate(t, name, p)
			assert.NotEqual(t, a, c, "a different seed should change the workload")
		})
	}
}

func TestGenerateCommonShape(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p := DefaultParams(name)
			reqs := mustGenerate(t, name, p)
			for i, r := range reqs {
				assert.Equal(t, i, r.ID)
				assert.GreaterOrEqual(t, r.MaxTokens, p.OutputMin)
				assert.LessOrEqual(t, r.MaxTokens, p.OutputMax)
				if i > 0 && r.FollowUp == nil && reqs[i-1].FollowUp == nil {
					assert.GreaterOrEqual(t, r.Arrival, reqs[i-1].Arrival, "arrivals are sorted")
				}
				tokens := r.Prompt
				if r.FollowUp != nil {
					tokens = r.FollowUp.UserTokens
				}
				for _, tok := range tokens {
					require.True(t, tok >= 0 && int(tok) < p.Vocab, "request %d: token %d outside [0, %d)", r.ID, tok, p.Vocab)
				}
			}
		})
	}
}

func TestPrefixCaching(t *testing.T) {
	p := DefaultParams("prefix_caching")
	reqs := mustGenerate(t, "prefix_caching", p)
	require.Len(t, reqs, 48)

	prefix := reqs[0].Prompt[:p.PrefixLen]
	firstSuffix := map[int32]int{}
	for i, r := range reqs {
		assert.Equal(t, time.Duration(i)*time.Second/8, r.Arrival, "request %d: have %v; want i/RPS", i, r.Arrival)
		suffix := len(r.Prompt) - p.PrefixLen
		assert.GreaterOrEqual(t, suffix, p.SuffixMin)
		assert.LessOrEqual(t, suffix, p.SuffixMax)
		assert.Equal(t, prefix, r.Prompt[:p.PrefixLen], "request %d shares the system prompt", i)
		firstSuffix[r.Prompt[p.PrefixLen]]++
	}
	assert.Len(t, firstSuffix, len(reqs), "every suffix starts with its own token, so sharing stops exactly at the prefix")

	// Prompts must not alias one another's memory.
	reqs[0].Prompt[0]++
	assert.NotEqual(t, reqs[0].Prompt[0], reqs[1].Prompt[0])
}

func TestNoSharedPrefixMatchesPrefixCachingSizes(t *testing.T) {
	p := DefaultParams("no_shared_prefix")
	shared := mustGenerate(t, "prefix_caching", p)
	unshared := mustGenerate(t, "no_shared_prefix", p)
	require.Len(t, unshared, len(shared))
	first := map[int32]bool{}
	for i := range shared {
		assert.Equal(t, len(shared[i].Prompt), len(unshared[i].Prompt), "request %d prompt length", i)
		assert.Equal(t, shared[i].MaxTokens, unshared[i].MaxTokens)
		assert.Equal(t, shared[i].Arrival, unshared[i].Arrival)
		first[unshared[i].Prompt[0]] = true
	}
	assert.Len(t, first, len(unshared), "no two prompts share even their first token")
}

func TestChunkedPrefill(t *testing.T) {
	p := DefaultParams("chunked_prefill")
	reqs := mustGenerate(t, "chunked_prefill", p)
	require.Len(t, reqs, p.Requests+p.LongPrompts)
	for i, r := range reqs {
		if i < p.Requests {
			assert.LessOrEqual(t, len(r.Prompt), p.SuffixMax, "short request %d", i)
			assert.GreaterOrEqual(t, len(r.Prompt), p.SuffixMin, "short request %d", i)
		} else {
			assert.Len(t, r.Prompt, 4*p.PrefixLen, "long request %d", i)
			assert.Greater(t, r.Arrival, reqs[p.Requests-1].Arrival, "long prompts arrive after the short ones")
		}
	}

	p.LongLen = 100
	reqs = mustGenerate(t, "chunked_prefill", p)
	assert.Len(t, reqs[len(reqs)-1].Prompt, 100)

	p.LongLen, p.PrefixLen = 0, 0
	_, err := Generate("chunked_prefill", p)
	assert.ErrorContains(t, err, "-long-len")
}

func TestMultiTurn(t *testing.T) {
	p := DefaultParams("multi_turn")
	reqs := mustGenerate(t, "multi_turn", p)
	c := p.Conversations
	require.Len(t, reqs, c*p.Turns)
	system := reqs[0].Prompt[:p.PrefixLen]
	for i, r := range reqs {
		turn, conv := i/c, i%c
		assert.Equal(t, time.Duration(conv)*time.Second/8, r.Arrival)
		if turn == 0 {
			require.Nil(t, r.FollowUp)
			assert.Equal(t, system, r.Prompt[:p.PrefixLen])
			continue
		}
		require.NotNil(t, r.FollowUp, "request %d", i)
		assert.Empty(t, r.Prompt)
		assert.Equal(t, i-c, r.FollowUp.Prev)
		assert.Equal(t, p.Think, r.FollowUp.Think)
		assert.GreaterOrEqual(t, len(r.FollowUp.UserTokens), p.SuffixMin)
		assert.LessOrEqual(t, len(r.FollowUp.UserTokens), p.SuffixMax)
	}
}

func TestDistinctTokens(t *testing.T) {
	tests := []struct{ n, vocab int }{{5, 10}, {10, 10}, {3, 1 << 30}, {7, 4}}
	for _, tt := range tests {
		r := newRand(1, streamTokens)
		have := distinctTokens(r, tt.n, tt.vocab)
		require.Len(t, have, tt.n)
		seen := map[int32]bool{}
		for _, tok := range have {
			require.True(t, tok >= 0 && int(tok) < tt.vocab)
			seen[tok] = true
		}
		if tt.n <= tt.vocab {
			assert.Len(t, seen, tt.n, "n=%d vocab=%d: have duplicates", tt.n, tt.vocab)
		}
	}
}

package workload

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoutingSharesExactlyTheSystemPrompts checks the routing workload's
// shape: conversation c's first turn starts with system prompt c mod K, the
// K system prompts share no token at the front, two conversations on one
// system prompt share it and nothing more, and later turns are follow-ups.
func TestRoutingSharesExactlyTheSystemPrompts(t *testing.T) {
	p := DefaultParams("routing")
	p.Conversations, p.Turns, p.PrefixLen, p.Vocab = 12, 3, 64, 4096
	const k = 4
	reqs, err := Routing(p, k)
	require.NoError(t, err)
	require.Len(t, reqs, 12*3)

	common := func(a, b []int32) int {
		n := 0
		for n < min(len(a), len(b)) && a[n] == b[n] {
			n++
		}
		return n
	}
	for c := range 12 {
		first := reqs[c]
		require.Nil(t, first.FollowUp)
		for d := range c {
			n := common(first.Prompt, reqs[d].Prompt)
			if c%k == d%k {
				assert.Equal(t, p.PrefixLen, n, "conversations %d and %d share system prompt %d", c, d, c%k)
			} else {
				assert.Zero(t, n, "conversations %d and %d use different system prompts", c, d)
			}
		}
		for turn := 1; turn < 3; turn++ {
			r := reqs[turn*12+c]
			require.NotNil(t, r.FollowUp)
			assert.Equal(t, (turn-1)*12+c, r.FollowUp.Prev)
		}
	}
	_, err = Routing(p, 0)
	assert.Error(t, err)
}

package misses

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func seq(from, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(from + i)
	}
	return out
}

// TestEveryMissedTokenHasOneReason feeds one ledger the life of a few
// prompts and checks each reason, and that the reasons always sum to the
// computed tokens.
func TestEveryMissedTokenHasOneReason(t *testing.T) {
	const bs = 4
	l := New(bs, 1024)
	p := seq(0, 10) // two whole blocks and a tail of 2

	r := l.Admit(p, "a", 0, 0)
	assert.Equal(t, Reasons{Cold: 8, Partial: 2, EvictedBy: -1}, r)
	l.Stored(Keys(p, "a", bs))

	// Same tokens, another tenant: the blocks exist under salt "a" only.
	r = l.Admit(p, "b", 0, 0)
	assert.Equal(t, Reasons{Salt: 8, Partial: 2, EvictedBy: -1}, r)

	// Tenant a reuses its first block; its second was evicted at step 7
	// by request 3.
	keys := Keys(p, "a", bs)
	l.Removed(keys[1].Salted, 7, 3)
	r = l.Admit(p, "a", 4, 0)
	assert.Equal(t, Reasons{Evicted: 4, Partial: 2, EvictedAt: 7, EvictedBy: 3}, r)

	// Cached again, the eviction is forgotten; missed anyway, the block
	// was let go without a report.
	l.Stored(keys)
	r = l.Admit(p, "a", 0, 0)
	assert.Equal(t, Reasons{Evicted: 8, Partial: 2, EvictedBy: -1}, r)

	// A preempted sequence recomputes the 6 tokens it had: one block and
	// half of the next; the rest of that block is salt (tenant a holds it)
	// and the tail partial.
	r = l.Admit(p, "z", 0, 6)
	assert.Equal(t, Reasons{Preempted: 6, Salt: 2, Partial: 2, EvictedBy: -1}, r)

	// A cached count inside a block: the block's remainder takes its reason.
	r = l.Admit(p, "b", 2, 0)
	assert.Equal(t, Reasons{Salt: 6, Partial: 2, EvictedBy: -1}, r)
	for cached := 0; cached <= len(p); cached++ {
		for pre := 0; pre <= len(p)-cached; pre++ {
			r := l.Admit(p, "a", cached, pre)
			require.Equal(t, len(p)-cached, r.Total(), "cached %d preempted %d", cached, pre)
			require.Equal(t, pre, r.Preempted)
		}
	}
}

// TestKeysChainAndSalt checks a block is named by its whole prefix and that
// only the salted half depends on the salt.
func TestKeysChainAndSalt(t *testing.T) {
	a := Keys(seq(0, 8), "a", 4)
	b := Keys(seq(0, 8), "b", 4)
	require.Len(t, a, 2)
	assert.Equal(t, a[0].Plain, b[0].Plain)
	assert.Equal(t, a[1].Plain, b[1].Plain)
	assert.NotEqual(t, a[0].Salted, b[0].Salted)
	other := Keys(append(seq(100, 4), seq(4, 4)...), "a", 4)
	assert.NotEqual(t, a[1].Plain, other[1].Plain, "same block after another prefix is another block")
	assert.Len(t, Keys(seq(0, 7), "", 4), 1)
}

// TestLedgerCapCountsAsCold checks the memory bound: blocks past the cap are
// not remembered, so their misses count as cold, never as salt or evicted.
func TestLedgerCapCountsAsCold(t *testing.T) {
	l := New(4, 1)
	p, q := seq(0, 4), seq(50, 4)
	l.Stored(Keys(p, "a", 4))
	l.Stored(Keys(q, "a", 4)) // over the cap: forgotten
	assert.Len(t, l.salted, 1)
	assert.Len(t, l.plain, 1)
	assert.Equal(t, 4, l.Admit(p, "b", 0, 0).Salt)
	assert.Equal(t, 4, l.Admit(q, "b", 0, 0).Cold)
	l.Removed(Keys(q, "a", 4)[0].Salted, 1, 0)
	assert.Equal(t, 4, l.Admit(q, "a", 0, 0).Cold)
}

// TestReasonsAdd checks totals keep the latest eviction.
func TestReasonsAdd(t *testing.T) {
	var tot Reasons
	tot.Add(Reasons{Cold: 1, Evicted: 2, EvictedAt: 5, EvictedBy: 1})
	tot.Add(Reasons{Salt: 3, Partial: 4, Preempted: 5, EvictedBy: -1})
	tot.Add(Reasons{Evicted: 1, EvictedAt: 3, EvictedBy: 2})
	assert.Equal(t, Reasons{Cold: 1, Evicted: 3, Salt: 3, Partial: 4, Preempted: 5, EvictedAt: 5, EvictedBy: 1}, tot)
	assert.Equal(t, 16, tot.Total())
}

// TestReasonsByName checks zero reasons are left out, and none is nil.
func TestReasonsByName(t *testing.T) {
	assert.Nil(t, Reasons{EvictedBy: -1}.ByName())
	assert.Equal(t, map[string]int{"cold": 1, "preempted": 2}, Reasons{Cold: 1, Preempted: 2}.ByName())
	assert.Equal(t, map[string]int{"evicted": 1, "salt": 2, "partial": 3}, Reasons{Evicted: 1, Salt: 2, Partial: 3}.ByName())
}

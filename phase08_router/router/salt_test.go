package router

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"kvlab/common/kvevents"
)

func TestRouteKeyCarriesTheCacheSalt(t *testing.T) {
	k := RouteKey(nil, "/v1/completions", []byte(`{"prompt": [1, 2, 3], "cache_salt": "tenant-a"}`))
	assert.Equal(t, Key{Salt: "tenant-a", Tokens: []int32{1, 2, 3}}, k)
	k = RouteKey(nil, "/completion", []byte(`{"prompt": [1, 2, 3]}`))
	assert.Equal(t, Key{Tokens: []int32{1, 2, 3}}, k)
}

// TestPrefixPolicyKeepsTenantsApart: after tenant a's prompt went to a
// replica, the same tokens under tenant b (or no salt) are a new prefix —
// the replica will not lend a's KV to b — and go by load; under a they
// follow a's route.
func TestPrefixPolicyKeepsTenantsApart(t *testing.T) {
	p := NewPrefix(0.5, 0)
	prompt := seq(1, 32)
	d := p.Pick(Key{Salt: "a", Tokens: prompt}, idle(3))
	p.Routed(Key{Salt: "a", Tokens: prompt}, d.Replica)

	busy := []Candidate{{0, 2}, {1, 2}, {2, 2}}
	busy[d.Replica].Load = 5 // a's replica is the busiest
	same := p.Pick(Key{Salt: "a", Tokens: prompt}, busy)
	assert.Equal(t, d.Replica, same.Replica, "the same tenant follows its prefix")
	assert.Equal(t, "prefix-match", same.Reason)
	for _, salt := range []string{"b", ""} {
		other := p.Pick(Key{Salt: salt, Tokens: prompt}, busy)
		assert.Equal(t, "least-load", other.Reason, "salt %q: another tenant's route is no match", salt)
		assert.NotEqual(t, d.Replica, other.Replica)
		assert.Zero(t, other.Matched)
	}
}

// TestKVIndexHashesWithTheRequestsSalt: a replica announces tenant a's
// blocks under a's hashes (the salt enters the first block's); only a
// request under the same salt is scored as holding them.
func TestKVIndexHashesWithTheRequestsSalt(t *testing.T) {
	x := NewKVIndex(4)
	a := seq(1, 16)
	hashes := kvevents.BlockHashes(a, 4, "a")
	x.Apply(0, kvevents.Batch{Events: []kvevents.Event{{Type: kvevents.BlockStored, BlockHashes: hashes, TokenIDs: a, BlockSize: 4}}})
	assert.Equal(t, map[int]int{0: 16}, x.Match(Key{Salt: "a", Tokens: a}, idle(1)))
	assert.Empty(t, x.Match(Key{Salt: "b", Tokens: a}, idle(1)))
	assert.Empty(t, x.Match(Key{Tokens: a}, idle(1)))
}

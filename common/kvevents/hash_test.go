package kvevents

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvevents/kveventstest"
)

// TestBlockHashesMatchVLLM checks every hash byte for byte against the
// vectors: block sizes 4 and 16, whole blocks only, a partial last block
// (no hash), a prompt shorter than a block (none at all), no salt, an ASCII
// and a non-ASCII cache_salt, token ids at every CBOR width boundary, and
// another seed.
func TestBlockHashesMatchVLLM(t *testing.T) {
	g := kveventstest.Load(t)
	for seed, want := range g.Roots {
		assert.Equal(t, want, RootHash(seed).String(), "NONE_HASH for PYTHONHASHSEED=%q", seed)
	}
	sizes := map[int]bool{}
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			sizes[c.BlockSize] = true
			toks := make([]int32, len(c.Tokens))
			for i, v := range c.Tokens {
				toks[i] = int32(v)
			}
			require.Len(t, c.Hashes, len(toks)/c.BlockSize, "the vectors hash full blocks only")
			got := ChainHashes(RootHash(c.Seed), toks, c.BlockSize, c.Salt)
			if c.Seed == DefaultHashSeed {
				assert.Equal(t, got, BlockHashes(toks, c.BlockSize, c.Salt))
			}
			gotHex := make([]string, len(got))
			for i, h := range got {
				gotHex[i] = h.String()
			}
			if diff := cmp.Diff(c.Hashes, gotHex); diff != "" {
				t.Errorf("hashes differ from vLLM's (-vLLM +ours):\n%s", diff)
			}
		})
	}
	assert.True(t, sizes[4] && sizes[16], "vectors for block sizes 4 and 16")
}

// TestSaltOnlyChangesTheChainThroughBlockZero: vLLM salts the first block
// only, so two salts give different hashes everywhere, and a salted chain
// continues exactly as HashBlock with no salt from its first block.
func TestSaltOnlyChangesTheChainThroughBlockZero(t *testing.T) {
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	a, b := BlockHashes(toks, 4, "a"), BlockHashes(toks, 4, "b")
	assert.NotEqual(t, a[0], b[0])
	assert.NotEqual(t, a[1], b[1])
	assert.Equal(t, a[1], HashBlock(a[0], toks[4:], ""))
}

func TestHashJSONAndUint64(t *testing.T) {
	h := BlockHashes([]int32{1, 2, 3, 4}, 4, "")[0]
	b, err := json.Marshal(h)
	require.NoError(t, err)
	assert.Equal(t, `"`+h.String()+`"`, string(b))
	var back Hash
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, h, back)
	p, err := ParseHash(h.String())
	require.NoError(t, err)
	assert.Equal(t, h, p)
	assert.Error(t, json.Unmarshal([]byte(`"abc"`), &back))
	assert.Error(t, json.Unmarshal([]byte(`12`), &back))

	// vLLM's integer form: int.from_bytes(hash, "big") & (2**64 - 1).
	var x Hash
	x[24], x[31] = 0x80, 0x01
	assert.Equal(t, uint64(0x8000000000000001), x.Uint64())
}

package cachefile

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
)

// TestDiskTierFindsNoBlockOfAnotherModelOrSeed: a block's hash names its
// tokens after its prefix, not the weights that computed its KV, so a
// server restarted on other weights of the same shape asks its disk tier
// for the very hashes the old one stored, and a tier that answered would
// promote KV the new model never computed. The identity's subdirectory
// keeps them apart: a tier of the new model, or of another hash seed, on
// the same directory finds none of the old blocks, refuses none (it never
// opens them) and stores its own beside them; the old identity's tier
// finds all of its blocks again, byte for byte.
func TestDiskTierFindsNoBlockOfAnotherModelOrSeed(t *testing.T) {
	dir := t.TempDir()
	old := tierBlocks(tierID, tierSeed, 3, 50)
	fill(t, dir, 10, old)

	retrained := tierID
	retrained.Model = "model-a, retrained"
	for _, c := range []struct {
		what string
		id   Identity
		seed string
	}{
		{"other weights", retrained, tierSeed},
		{"another hash seed", tierID, "another seed"},
	} {
		t.Run(c.what, func(t *testing.T) {
			mine := tierBlocks(c.id, c.seed, 3, 50) // the same tokens, and KV of its own:
			for i := range mine {
				for j := range mine[i].KV {
					mine[i].KV[j] ^= 0x5a
				}
				mine[i].Sum = kvcache.TierSum(mine[i].KV)
			}
			if c.seed == tierSeed {
				for i := range old {
					require.Equal(t, old[i].Hash, mine[i].Hash, "the same tokens hash the same under any weights")
					require.False(t, bytes.Equal(old[i].KV, mine[i].KV))
				}
			}
			d, err := OpenDiskTier(DiskTierConfig{Dir: dir, Capacity: 10 * blockFileBytes(t, c.id, c.seed), Identity: c.id, Seed: c.seed})
			require.NoError(t, err)
			defer d.Close()
			assert.NotEqual(t, IdentityDir(tierID, tierSeed), IdentityDir(c.id, c.seed))
			s := d.Stats()
			assert.Zero(t, s.Blocks, "none of the old identity's blocks is counted")
			assert.Zero(t, s.Corrupt, "nor refused: they are never opened")
			for _, b := range old {
				assert.False(t, d.Has(b.Hash))
				_, ok := d.Get(b.Hash)
				assert.False(t, ok, "an old block is never promoted")
			}
			for _, b := range mine {
				d.Put(b)
			}
			require.NoError(t, d.Flush(hang))
			for _, b := range mine {
				have, ok := d.Get(b.Hash)
				require.True(t, ok)
				requireSameBlock(t, b, have)
			}
			require.NoError(t, d.Close())
		})
	}

	again := openTier(t, dir, 10)
	assert.Equal(t, len(old), again.Stats().Blocks, "the old identity's blocks are all still there")
	assert.Zero(t, again.Stats().Corrupt)
	for _, b := range old {
		have, ok := again.Get(b.Hash)
		require.True(t, ok)
		requireSameBlock(t, b, have)
	}
}

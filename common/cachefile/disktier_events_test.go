package cachefile

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvevents"
)

// TestDiskTierAnnouncesItsBlocks: as a kvcache.TierEvents, the disk tier
// announces a block on DISK when it queues it and removes it when it lets
// it go (evicted to stay in budget), and a new subscriber's state is what
// it holds, read from the files after a restart: each block with its
// tokens and parent, as the pool's events name them.
func TestDiskTierAnnouncesItsBlocks(t *testing.T) {
	dir := t.TempDir()
	bs := tierBlocks(tierID, tierSeed, 3, 70)
	var mu sync.Mutex
	held := map[kvevents.Hash]bool{}
	sink := func(ev kvevents.Event) {
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, "DISK", ev.Medium)
		for _, h := range ev.BlockHashes {
			switch ev.Type {
			case kvevents.BlockStored:
				assert.False(t, held[h], "stored twice")
				held[h] = true
			case kvevents.BlockRemoved:
				assert.True(t, held[h], "removed, not stored")
				delete(held, h)
			}
		}
	}
	d := openTier(t, dir, 2)
	d.SetEventSink(sink)
	for _, b := range bs {
		d.Put(b)
		require.NoError(t, d.Flush(hang))
	}
	mu.Lock()
	assert.Equal(t, map[kvevents.Hash]bool{bs[1].Hash: true, bs[2].Hash: true}, held, "the first was evicted")
	mu.Unlock()
	require.NoError(t, d.Close())

	again := openTier(t, dir, 2)
	evs := again.StoredEvents()
	require.Len(t, evs, 2)
	for _, ev := range evs {
		i := 1
		if ev.BlockHashes[0] == bs[2].Hash {
			i = 2
		}
		assert.Equal(t, bs[i].Hash, ev.BlockHashes[0])
		assert.Equal(t, bs[i].Tokens, ev.TokenIDs)
		assert.Equal(t, bs[i].Parent, ev.ParentBlockHash)
		assert.Equal(t, "DISK", ev.Medium)
	}
}

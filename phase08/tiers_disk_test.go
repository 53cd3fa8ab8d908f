package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/cli"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
)

// TestDiskTieredCacheIsExact: under a pool too small for the workload's
// prefixes, a host-memory tier too small as well passes what it evicts
// down to a disk tier; every design's tokens and logits equal the
// uncached engine's bit for bit, in every KV dtype, while the disk tier
// really is used: blocks are promoted from it. A second engine on the same
// directory (a restart) is exact too, and the first of its requests whose
// prefix the first engine's disk tier stored takes it from the files.
// (What the first engine's pool and RAM tier still held when it stopped
// never went down to the disk.)
func TestDiskTieredCacheIsExact(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Options(model.ArchLlama, 5))
	for _, dt := range kernels.KVDTypes {
		base := tierRun(t, m, dt, nil, false)
		for _, v := range Variants {
			t.Run(fmt.Sprintf("%v/%s", dt, v.Name), func(t *testing.T) {
				dir := t.TempDir()
				first := diskTierRun(t, m, dt, v.PrefixCache, dir)
				again := diskTierRun(t, m, dt, v.PrefixCache, dir)
				for i := range base.results {
					requireBitEqual(t, base.results[i], first.results[i], fmt.Sprintf("request %d with RAM and disk tiers, against the uncached run", i))
					requireBitEqual(t, base.results[i], again.results[i], fmt.Sprintf("request %d after the restart, against the uncached run", i))
				}
				assert.Positive(t, first.ram.Evictions, "the RAM tier is too small: it passed blocks down")
				assert.Positive(t, first.disk.Puts, "the disk tier stored them")
				require.Positive(t, first.counters.Promoted[1], "the disk tier gave blocks back")
				require.Positive(t, again.firstWarm, "after the restart, the first request whose prefix the disk tier held takes it from the tier's files")
				assert.Zero(t, first.disk.Corrupt+again.disk.Corrupt)
				t.Logf("prefill tokens: %d uncached, %d with both tiers, %d after the restart (promoted from RAM, disk: %v, then %v; %d disk blocks at the restart)",
					base.stats.PrefillTokens, first.stats.PrefillTokens, again.stats.PrefillTokens, first.counters.Promoted, again.counters.Promoted, again.diskAtStart)
			})
		}
	}
}

type diskTierResult struct {
	tierResult
	ram, disk   kvcache.TierStats
	firstWarm   int // blocks the first request whose prefix the disk held at the start took from the disk tier
	diskAtStart int // blocks the disk tier found when it opened
}

// diskTierRun serves tierRun's workload (twelve conversations of two
// turns on 48-token prefixes, revisited in shuffled rounds, on a pool of
// about four prefixes) with a RAM tier of eight blocks over a DiskTier in
// dir, which it closes at the end, as a server that shuts down does.
func diskTierRun(t *testing.T, m *model.Model, dt kernels.KVDType, build cli.CacheBuilder, dir string) diskTierResult {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.BlockSize, cfg.NumBlocks, cfg.MaxBatchTokens, cfg.MaxRunning = 8, 40, 32, 2
	cfg.PrefixCache, cfg.KVCacheDType, cfg.Audit = build, dt, true
	id := cachefile.Identity{
		Model: "phase08-synthetic-llama-5", BlockSize: cfg.BlockSize, Layers: m.Config.NumHiddenLayers,
		KVDim: m.Config.NumKeyValueHeads * m.Config.HeadDim, DType: dt.Name(),
	}
	disk, err := cachefile.OpenDiskTier(cachefile.DiskTierConfig{Dir: dir, Capacity: 64 << 20, Identity: id, Seed: kvevents.DefaultHashSeed})
	require.NoError(t, err)
	var out diskTierResult
	out.diskAtStart = disk.Stats().Blocks
	block := kvcache.TierBlock{KV: make([]byte, id.KVBytes()), Tokens: make([]int32, cfg.BlockSize)}
	ram := kvcache.NewRAMTier(8*block.Size(), disk)
	cfg.Tiers, cfg.TiersAlwaysPromote = []kvcache.Tier{ram, disk}, true // counts independent of timing
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	defer e.Close()

	// warm: the conversations whose first block the disk tier held when
	// it opened. Their first visit finds the rest of the prefix nowhere
	// else: no two conversations share a block.
	hasher := kvevents.NewHasher(id.HashAlgo, kvevents.DefaultHashSeed, id.LoRA)
	var warm []bool
	for _, p := range tierPrefixes(int32(m.Config.VocabSize)) {
		warm = append(warm, disk.Has(hasher.First(p[:cfg.BlockSize], "")))
	}
	seenWarm := false
	out.results = serveConversations(t, e, int32(m.Config.VocabSize), func(c int, _ []int32) func(engine.Result) {
		if seenWarm || !warm[c] {
			return nil
		}
		seenWarm = true
		before := e.Pool().TierCounters().Promoted[1]
		return func(engine.Result) { out.firstWarm = e.Pool().TierCounters().Promoted[1] - before }
	})
	out.stats = e.Stats()
	out.counters = e.Pool().TierCounters()
	require.NoError(t, disk.Close())
	out.ram, out.disk = ram.Stats(), disk.Stats()
	return out
}

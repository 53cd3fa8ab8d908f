package kvcache_test

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// heldTier is a tier that holds exactly the blocks a test gives it.
type heldTier struct {
	blocks map[kvevents.Hash]kvcache.TierBlock
}

func (t *heldTier) Name() string            { return "CPU" }
func (t *heldTier) Put(b kvcache.TierBlock) { t.blocks[b.Hash] = b }
func (t *heldTier) Get(h kvevents.Hash) (kvcache.TierBlock, bool) {
	b, ok := t.blocks[h]
	return b, ok
}
func (t *heldTier) Has(h kvevents.Hash) bool { _, ok := t.blocks[h]; return ok }
func (t *heldTier) Stats() kvcache.TierStats {
	return kvcache.TierStats{Name: "CPU", Blocks: len(t.blocks)}
}

const trapBlock = 4

func trapEngine(t *testing.T, m *model.Model, tiers ...kvcache.Tier) *engine.Engine {
	t.Helper()
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = trapBlock, 12, 32, 1
	c.Audit = true
	if len(tiers) > 0 {
		// Promote whatever it costs: the counts below must not depend on
		// how busy the machine is.
		c.PrefixCache, c.Tiers, c.TiersAlwaysPromote = designs[0].new, tiers, true
	}
	e, err := engine.New(m, c)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func run(t *testing.T, e *engine.Engine, id int, p []int32, salt string) engine.Result {
	t.Helper()
	res := e.RunAll([]engine.Request{{ID: id, Prompt: p, MaxTokens: 3, IgnoreEOS: true, KeepLogits: true, CacheSalt: salt}})
	require.NoError(t, res[id].Err)
	return *res[id]
}

func bitEqual(a, b engine.Result) bool {
	if !slices.Equal(a.Tokens, b.Tokens) {
		return false
	}
	for i := range a.Logits {
		for j := range a.Logits[i] {
			if math.Float32bits(a.Logits[i][j]) != math.Float32bits(b.Logits[i][j]) {
				return false
			}
		}
	}
	return true
}

// demoted serves p on an engine whose pool (12 blocks of 4) cannot keep it
// while two other prompts run, so every block of p is demoted; it returns
// the tier that holds them.
func demoted(t *testing.T, m *model.Model, p []int32, salt string) *kvcache.RAMTier {
	t.Helper()
	ram := kvcache.NewRAMTier(64<<20, nil)
	e := trapEngine(t, m, ram)
	run(t, e, 1, p, salt)
	run(t, e, 2, slices.Repeat([]int32{9}, 40), "")
	run(t, e, 3, slices.Repeat([]int32{8}, 40), "")
	for i, h := range kvevents.BlockHashes(p, trapBlock, salt) {
		require.True(t, ram.Has(h), "block %d of p was demoted", i)
	}
	return ram
}

// TestPromotionStopsAtTheFirstGap: a tier may hold a block whose parent it
// no longer holds (evicted before it, or never demoted: it was still in
// use). Promotion copies blocks consecutively from the cache's match and
// stops at the first one no tier has: a block promoted past the gap would
// land in the page after the match, one block early, and attention would
// read its KV at the wrong positions. Here the tier holds blocks 0, 2 and
// 3 of the prompt but not 1: only block 0 comes back, and the output is
// the uncached engine's.
func TestPromotionStopsAtTheFirstGap(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	p := make([]int32, 4*trapBlock+2)
	for i := range p {
		p[i] = int32(3 + 11*i)
	}
	ram := demoted(t, m, p, "")
	hs := kvevents.BlockHashes(p, trapBlock, "")
	held := &heldTier{blocks: map[kvevents.Hash]kvcache.TierBlock{}}
	for _, i := range []int{0, 2, 3} {
		b, ok := ram.Get(hs[i])
		require.True(t, ok)
		held.blocks[hs[i]] = b
	}
	e := trapEngine(t, m, held)
	got := run(t, e, 1, p, "")
	assert.Equal(t, []int{trapBlock}, got.Promoted, "block 0 only: block 1 is the gap")
	assert.True(t, bitEqual(run(t, trapEngine(t, m), 1, p, ""), got), "the output is the uncached engine's")
}

// TestTierKeepsTenantsApart: a block demoted under one tenant's cache salt
// is found again under that salt only. Blocks are named in a tier by their
// chained hash, whose first block carries the salt; a tier keyed by the
// tokens alone would hand tenant A's KV to tenant B, whose time to first
// token would then tell B that A sent the prompt (the side channel salts
// close in the pool).
func TestTierKeepsTenantsApart(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	p := make([]int32, 4*trapBlock+2)
	for i := range p {
		p[i] = int32(5 + 13*i)
	}
	ram := demoted(t, m, p, "tenant-a")
	e := trapEngine(t, m, ram)
	assert.Zero(t, run(t, e, 1, p, "tenant-b").Cached, "another tenant finds nothing")
	assert.Zero(t, run(t, e, 2, p, "").Cached, "nor does a request with no salt")
	got := run(t, e, 3, p, "tenant-a")
	assert.Equal(t, 4*trapBlock, got.Cached, "the tenant itself finds its blocks")
}

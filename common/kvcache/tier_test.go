package kvcache_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model/modeltest"
)

func tierBlock(seed byte, kvBytes int) kvcache.TierBlock {
	kv := make([]byte, kvBytes)
	for i := range kv {
		kv[i] = seed + byte(i)
	}
	b := kvcache.TierBlock{Hash: kvevents.Hash{31: seed}, Tokens: []int32{int32(seed), 1, 2, 3}, KV: kv}
	b.Sum = kvcache.TierSum(kv)
	return b
}

// TestRAMTierKeepsTheMostRecent: under its byte budget the tier evicts the
// least recently put or got block first and passes it to the tier below;
// Has changes no recency; a block larger than the budget goes straight
// down.
func TestRAMTierKeepsTheMostRecent(t *testing.T) {
	size := tierBlock(0, 100).Size()
	below := kvcache.NewRAMTier(10*size, nil)
	ram := kvcache.NewRAMTier(3*size, below)
	for s := range byte(3) {
		ram.Put(tierBlock(s, 100))
	}
	_, ok := ram.Get(kvevents.Hash{31: 0}) // 0 is now the most recent
	require.True(t, ok)
	assert.True(t, ram.Has(kvevents.Hash{31: 1}))
	ram.Put(tierBlock(3, 100)) // evicts 1, the least recent (Has did not touch it)
	assert.False(t, ram.Has(kvevents.Hash{31: 1}))
	assert.True(t, below.Has(kvevents.Hash{31: 1}), "evicted to the tier below")
	for _, s := range []byte{0, 2, 3} {
		assert.True(t, ram.Has(kvevents.Hash{31: s}), "block %d", s)
	}
	st := ram.Stats()
	assert.Equal(t, 3, st.Blocks)
	assert.Equal(t, 3*size, st.Bytes)
	assert.Equal(t, 1, st.Evictions)
	assert.Equal(t, 1, st.Hits)

	ram.Put(tierBlock(9, 1000)) // larger than the whole budget
	assert.False(t, ram.Has(kvevents.Hash{31: 9}))
	assert.True(t, below.Has(kvevents.Hash{31: 9}))
	assert.Equal(t, 1, ram.Stats().Dropped)
}

// TestRAMTierNeverGivesBackDamagedKV: a block whose KV changed after it was
// put fails its checksum: Get drops it and counts it, never returns it.
func TestRAMTierNeverGivesBackDamagedKV(t *testing.T) {
	ram := kvcache.NewRAMTier(1<<20, nil)
	b := tierBlock(7, 64)
	ram.Put(b)
	b.KV[10] ^= 1 // the tier holds b's KV slice: a bit flips in memory
	_, ok := ram.Get(b.Hash)
	assert.False(t, ok)
	assert.False(t, ram.Has(b.Hash))
	assert.Equal(t, 1, ram.Stats().Corrupt)
}

// mediumMirror is what a KV-event subscriber knows, per medium.
type mediumMirror map[string]map[kvevents.Hash]bool

func (m mediumMirror) apply(t *testing.T, evs []kvevents.Event) {
	t.Helper()
	for _, ev := range evs {
		med := kvevents.MediumOf(ev)
		if m[med] == nil {
			m[med] = map[kvevents.Hash]bool{}
		}
		switch ev.Type {
		case kvevents.AllBlocksCleared:
			clear(m)
		case kvevents.BlockStored:
			for _, h := range ev.BlockHashes {
				m[med][h] = true
			}
		case kvevents.BlockRemoved:
			for _, h := range ev.BlockHashes {
				require.True(t, m[med][h], "BlockRemoved in %s of %s, which was not stored there", med, h)
				delete(m[med], h)
			}
		}
	}
}

// TestTierEventsNameTheMedium: with a host-memory tier under the cache,
// KV events follow each block down and back, as vLLM's offloading reports
// them: a block the cache evicts is a BlockRemoved on GPU and a
// BlockStored on CPU, and the tier's own evictions are BlockRemoved on
// CPU. Applied in order, the events give, per medium, the state a new
// subscriber starts from, and the CPU state is what the tier holds. The
// tiers are attached before the observer (engine.Config.Tiers), which
// then starts queueing events.
func TestTierEventsNameTheMedium(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	mc := m.Config
	block := int64(4*4 + mc.NumHiddenLayers*2*4*mc.NumKeyValueHeads*mc.HeadDim*4) // a float32 block's Size
	ram := kvcache.NewRAMTier(6*block, nil)                                       // six blocks
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = 4, 24, 32, 2
	c.PrefixCache, c.Audit, c.Tiers = designs[0].new, true, []kvcache.Tier{ram}
	e, err := engine.New(m, c)
	require.NoError(t, err)
	defer e.Close()
	obs := e.Pool().Observe(kvevents.DefaultHashSeed)
	require.Equal(t, block, int64(4*4+e.Pool().Layers()*e.Pool().BlockBytes()))

	rng := rand.New(rand.NewPCG(3, 4))
	prefixes := make([][]int32, 8)
	for i := range prefixes {
		prefixes[i] = randomTokens(rng, 16, m.Config.VocabSize)
	}
	seen := mediumMirror{}
	for wave := range 30 {
		p := slices.Concat(prefixes[rng.IntN(len(prefixes))], randomTokens(rng, 3, m.Config.VocabSize))
		require.NoError(t, e.Submit(engine.Request{ID: wave, Prompt: p, MaxTokens: 2, IgnoreEOS: true}))
		for e.Busy() {
			e.Step()
			live, state := obs.Drain(true)
			seen.apply(t, live)
			want := mediumMirror{}
			want.apply(t, state)
			require.Equal(t, len(want["CPU"]), len(seen["CPU"]), "wave %d: CPU blocks", wave)
			require.Equal(t, want["CPU"], seen["CPU"])
			require.Equal(t, want[kvevents.Medium], seen[kvevents.Medium])
		}
	}
	require.Positive(t, ram.Stats().Evictions, "the tier was small enough to evict")
	require.Equal(t, ram.Stats().Blocks, len(seen["CPU"]))
	for h := range seen["CPU"] {
		assert.True(t, ram.Has(h))
	}
}

// TestFlushTiersCopiesTheCache: at a shutdown, FlushTiers copies what the
// cache holds into the first tier, and Drain sends that tier's blocks down:
// the tier below then holds every block of the prompts served, and a
// fresh engine over it alone finds them.
func TestFlushTiersCopiesTheCache(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	below := kvcache.NewRAMTier(64<<20, nil)
	ram := kvcache.NewRAMTier(64<<20, below)
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = 4, 64, 32, 2
	c.PrefixCache, c.Audit, c.Tiers = designs[0].new, true, []kvcache.Tier{ram}
	e, err := engine.New(m, c)
	require.NoError(t, err)
	defer e.Close()
	p := randomTokens(rand.New(rand.NewPCG(5, 6)), 18, m.Config.VocabSize)
	require.NoError(t, e.RunAll([]engine.Request{{ID: 1, Prompt: p, MaxTokens: 2, IgnoreEOS: true}})[1].Err)
	require.Zero(t, ram.Stats().Blocks, "nothing was evicted")
	assert.Equal(t, 4, e.Pool().FlushTiers(), "the prompt's four whole blocks")
	assert.Zero(t, e.Pool().FlushTiers(), "the tier holds them now")
	ram.Drain()
	assert.Zero(t, ram.Stats().Blocks)
	for _, h := range kvevents.BlockHashes(p, 4, "") {
		assert.True(t, below.Has(h))
	}

	c.Tiers = []kvcache.Tier{below}
	fresh, err := engine.New(m, c)
	require.NoError(t, err)
	defer fresh.Close()
	r := fresh.RunAll([]engine.Request{{ID: 1, Prompt: p, MaxTokens: 2, IgnoreEOS: true}})[1]
	require.NoError(t, r.Err)
	assert.Equal(t, []int{16}, r.Promoted)
}

// TestPromotionRuleWeighsMedians: the rule that skips a tier compares the
// median of its latest copy times with the median of the forward's latest
// times per row, so one slow copy does not make a cheap tier look dear,
// while a tier that is dear on most copies is skipped; and with the rule
// off every block is promoted.
func TestPromotionRuleWeighsMedians(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = 4, 12, 32, 1
	slow := &slowTier{RAMTier: kvcache.NewRAMTier(64<<20, nil), delay: 20 * time.Millisecond}
	c.PrefixCache, c.Tiers = designs[0].new, []kvcache.Tier{slow}
	e, err := engine.New(m, c)
	require.NoError(t, err)
	defer e.Close()
	id := 0
	run := func(p []int32) engine.Result {
		id++
		r := e.RunAll([]engine.Request{{ID: id, Prompt: p, MaxTokens: 1, IgnoreEOS: true}})[id]
		require.NoError(t, r.Err)
		return *r
	}
	p := slices.Repeat([]int32{3, 1, 4, 1}, 4)
	// promoted serves p, whose blocks the tier holds, and pushes them out
	// of the pool again with a prompt of as many blocks as the pool.
	promoted := func() int {
		r := run(p)
		run(slices.Repeat([]int32{9}, 44))
		return slices.Max(append([]int{0}, r.Promoted...))
	}
	run(p)
	run(slices.Repeat([]int32{9}, 44))
	for i := range 12 { // cheap copies, one of them very slow
		if i == 6 {
			slow.slowGets = 1
		}
		assert.Positive(t, promoted(), "round %d: a cheap tier is used", i)
	}
	slow.slowGets = 1 << 30 // now every copy costs more than computing
	skipped := 0
	for range 20 {
		if promoted() == 0 {
			skipped++
		}
	}
	assert.Positive(t, skipped, "a dear tier is skipped once most copies are dear")
	e.Pool().SetTierCostRule(false)
	assert.Positive(t, promoted(), "with the rule off, promoted whatever it costs")
}

// slowTier is a RAM tier whose next slowGets Gets take delay each.
type slowTier struct {
	*kvcache.RAMTier
	delay    time.Duration
	slowGets int
}

func (s *slowTier) Get(h kvevents.Hash) (kvcache.TierBlock, bool) {
	if s.slowGets > 0 {
		s.slowGets--
		time.Sleep(s.delay)
	}
	return s.RAMTier.Get(h)
}

package kvcache_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model/modeltest"
	"kvlab/common/server"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// designs are the three prefix caches, built as the phase-8 experiment
// builds them.
var designs = []struct {
	name string
	new  func(a *kvcache.Allocator, bs int) kvcache.PrefixCache
}{
	{"radix", radix.New},
	{"blockhash", func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs) }},
	{"trie", func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return trie.New(a, bs, trie.DeepestFirst) }},
}

// mirror is what a subscriber knows after applying every event it got.
type mirror map[kvevents.Hash]kvevents.Event // hash → a one-block BlockStored

func (m mirror) apply(t *testing.T, evs []kvevents.Event) {
	t.Helper()
	for _, ev := range evs {
		switch ev.Type {
		case kvevents.AllBlocksCleared:
			clear(m)
		case kvevents.BlockStored:
			require.Len(t, ev.TokenIDs, len(ev.BlockHashes)*ev.BlockSize)
			parent := ev.ParentBlockHash
			for i, h := range ev.BlockHashes {
				_, dup := m[h]
				require.False(t, dup, "BlockStored for %s, which is announced already", h)
				m[h] = kvevents.Event{Type: kvevents.BlockStored, BlockHashes: []kvevents.Hash{h}, ParentBlockHash: parent, TokenIDs: ev.TokenIDs[i*ev.BlockSize : (i+1)*ev.BlockSize], BlockSize: ev.BlockSize}
				p := h
				parent = &p
			}
		case kvevents.BlockRemoved:
			for _, h := range ev.BlockHashes {
				_, ok := m[h]
				require.True(t, ok, "BlockRemoved for %s, which was not announced", h)
				delete(m, h)
			}
		}
	}
}

// chain returns the tokens from the root to h, or nil if an ancestor is
// not announced (vLLM's events allow that: a parent evicted before its
// child leaves the child announced but unreachable).
func (m mirror) chain(h kvevents.Hash) []int32 {
	var blocks [][]int32
	for {
		ev, ok := m[h]
		if !ok {
			return nil
		}
		blocks = append(blocks, ev.TokenIDs)
		if ev.ParentBlockHash == nil {
			break
		}
		h = *ev.ParentBlockHash
	}
	slices.Reverse(blocks)
	return slices.Concat(blocks...)
}

// TestObserverAnnouncesWhatTheCacheFinds drives each design through the
// engine on a pool small enough to evict, and after every step checks the
// event stream against two outside truths: vLLM's hashes of the prompts
// (kvevents.BlockHashes, tested against vectors from vLLM's algorithm) and
// what the cache itself finds (MatchLen).
//
//   - every block MatchLen finds for a prompt served so far is announced,
//     under the hash vLLM would give it;
//   - every announced block whose ancestors are announced is found by
//     MatchLen of its chain's tokens, and the cache holds it;
//   - the events, applied in order, give exactly the observer's state.
func TestObserverAnnouncesWhatTheCacheFinds(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			c := engine.DefaultConfig()
			c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = 4, 40, 32, 4
			c.PrefixCache, c.Audit = d.new, true
			e, err := engine.New(m, c)
			require.NoError(t, err)
			defer e.Close()
			pool := e.Pool()
			obs := pool.Observe(kvevents.DefaultHashSeed)
			require.NotNil(t, obs)

			rng := rand.New(rand.NewPCG(1, 2))
			vocab := m.Config.VocabSize
			prefixes := make([][]int32, 3)
			for i := range prefixes {
				prefixes[i] = randomTokens(rng, 12, vocab)
			}
			seen := mirror{}
			var prompts [][]int32
			stored, removed := 0, 0
			evicted := false
			for wave := range 12 {
				for j := range 4 {
					p := slices.Concat(prefixes[rng.IntN(len(prefixes))], randomTokens(rng, rng.IntN(10), vocab))
					r := engine.Request{ID: wave*10 + j, Prompt: p, MaxTokens: 3, IgnoreEOS: true}
					if j == 0 {
						r.N = 2 // forked samples share the prompt's blocks
					}
					require.NoError(t, e.Submit(r))
					prompts = append(prompts, p)
				}
				for e.Busy() {
					e.Step()
					live, state := obs.Drain(true)
					for _, ev := range live {
						if ev.Type == kvevents.BlockStored {
							stored += len(ev.BlockHashes)
						} else {
							removed += len(ev.BlockHashes)
						}
					}
					seen.apply(t, live)
					want := mirror{}
					want.apply(t, state)
					require.Equal(t, want, seen, "the events applied in order give the observer's state")
					checkAgainstCache(t, pool, seen, prompts)
				}
				evicted = evicted || pool.Cache().Stats().Evicted > 0
			}
			assert.True(t, evicted, "the pool was small enough to evict")
			assert.Positive(t, removed, "evictions were announced")
			t.Logf("%s: %d blocks stored, %d removed, %d announced at the end", d.name, stored, removed, obs.Announced())
			assert.Positive(t, obs.Announced())
		})
	}
}

func checkAgainstCache(t *testing.T, pool *kvcache.Pool, seen mirror, prompts [][]int32) {
	t.Helper()
	bs := pool.BlockSize()
	for _, p := range prompts {
		found := pool.MatchLen("", p) / bs
		for i, h := range kvevents.BlockHashes(p, bs, "")[:found] {
			_, ok := seen[h]
			require.True(t, ok, "block %d of a prompt MatchLen finds (%d blocks) is not announced", i, found)
		}
	}
	for h, ev := range seen {
		toks := seen.chain(h)
		if toks == nil {
			continue
		}
		require.Equal(t, kvevents.BlockHashes(toks, bs, "")[len(toks)/bs-1], h, "the announced hash is vLLM's hash of its chain")
		require.GreaterOrEqual(t, pool.MatchLen("", toks), len(toks), "an announced chain %v is found whole (block %s, tokens %v)", toks, h, ev.TokenIDs)
	}
	require.NoError(t, pool.Observer().Visit(func(b kvcache.CachedBlock) error {
		if pool.Cache().Holds(b.Block) == 0 {
			return fmt.Errorf("announced block %d (%s) is not held by the cache", b.Block, b.Hash)
		}
		return nil
	}))
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(vocab))
	}
	return p
}

// TestObserveWithoutCache: a pool with no prefix cache announces nothing
// and has no observer.
func TestObserveWithoutCache(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks = 4, 16
	e, err := engine.New(m, c)
	require.NoError(t, err)
	defer e.Close()
	assert.Nil(t, e.Pool().Observe("0"))
	assert.Nil(t, e.Pool().Observer())
}

// TestObserveWithNamesBlocksAsItsHasher: an observer announces a served
// prompt's blocks under its hasher's names — every vLLM algorithm, a LoRA
// name on every block, the request's cache salt on the first — and under
// no other name.
func TestObserveWithNamesBlocksAsItsHasher(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	rng := rand.New(rand.NewPCG(3, 4))
	prompt := randomTokens(rng, 14, m.Config.VocabSize) // three whole blocks of 4, and a partial one
	for _, a := range kvevents.HashAlgos() {
		for _, tc := range []struct{ lora, salt string }{{"", ""}, {"adapter-1", "tenant-a"}} {
			t.Run(fmt.Sprintf("%s-%q-%q", a, tc.lora, tc.salt), func(t *testing.T) {
				c := engine.DefaultConfig()
				c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = 4, 16, 32, 1
				c.PrefixCache = radix.New
				e, err := engine.New(m, c)
				require.NoError(t, err)
				defer e.Close()
				h := kvevents.NewHasher(a, "42", tc.lora)
				obs := e.Pool().ObserveWith(h)
				require.NotNil(t, obs)
				assert.Equal(t, h, obs.Hasher())
				require.NoError(t, e.Submit(engine.Request{ID: 1, Prompt: prompt, MaxTokens: 1, IgnoreEOS: true, CacheSalt: tc.salt}))
				for e.Busy() {
					e.Step()
				}
				_, state := obs.Drain(true)
				var announced []kvevents.Hash
				for _, ev := range state[1:] {
					announced = append(announced, ev.BlockHashes...)
				}
				// One chain, so the state's parents-first order is the chain's.
				assert.Equal(t, h.BlockHashes(prompt, 4, tc.salt), announced, "the prompt's three whole blocks, under %s", a)
				other := kvevents.NewHasher(a, "42", "").BlockHashes(prompt, 4, "")
				if tc.lora != "" {
					for _, x := range other {
						assert.NotContains(t, announced, x, "no block is announced under the plain chain")
					}
				}
			})
		}
	}
}

// TestCacheFileKeepsTheHasher: the persistent tier (server.CacheFile)
// saves blocks under the observer's hasher and records its algorithm and
// LoRA name; a server naming blocks the same way restores them, one on
// another algorithm or another LoRA name refuses the file and says why.
// (It lives here, beside the observer whose names the file carries.)
func TestCacheFileKeepsTheHasher(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	rng := rand.New(rand.NewPCG(5, 6))
	prompt := randomTokens(rng, 13, m.Config.VocabSize)
	path := filepath.Join(t.TempDir(), server.CacheFileName)
	open := func(h kvevents.Hasher) (*engine.Engine, *server.CacheFile) {
		c := engine.DefaultConfig()
		c.BlockSize, c.NumBlocks, c.MaxBatchTokens, c.MaxRunning = 4, 16, 32, 1
		c.PrefixCache = radix.New
		e, err := engine.New(m, c)
		require.NoError(t, err)
		t.Cleanup(e.Close)
		p := e.Pool()
		return e, &server.CacheFile{
			Path:     path,
			Identity: server.CacheIdentity{Model: "m", BlockSize: p.BlockSize(), Layers: p.Layers(), KVDim: p.KVDim(), DType: "float32", HashAlgo: h.Algo(), LoRA: h.LoRA()},
			Pool:     p,
			Observer: p.ObserveWith(h),
			Seed:     h.Seed(),
		}
	}
	saved := kvevents.NewHasher(kvevents.XXHash, "42", "adapter-1")
	e, f := open(saved)
	require.NoError(t, e.Submit(engine.Request{ID: 1, Prompt: prompt, MaxTokens: 1, IgnoreEOS: true}))
	for e.Busy() {
		e.Step()
	}
	n, err := f.Save()
	require.NoError(t, err)
	require.Equal(t, 3, n, "the prompt's whole blocks")

	_, same := open(saved)
	got, err := same.Restore()
	require.NoError(t, err, "the same hasher restores the file, its records checked under xxhash and the LoRA name")
	assert.Equal(t, n, got)
	_, state := same.Observer.Drain(true)
	var announced []kvevents.Hash
	for _, ev := range state[1:] {
		announced = append(announced, ev.BlockHashes...)
	}
	assert.Equal(t, saved.BlockHashes(prompt, 4, "")[:3], announced)

	for _, other := range []kvevents.Hasher{
		kvevents.NewHasher(kvevents.SHA256, "42", "adapter-1"),
		kvevents.NewHasher(kvevents.SHA256CBOR, "42", "adapter-1"),
		kvevents.NewHasher(kvevents.XXHash, "42", ""),
		kvevents.NewHasher(kvevents.XXHash, "42", "adapter-2"),
	} {
		_, g := open(other)
		got, err := g.Restore()
		require.Error(t, err, "%s, LoRA %q", other.Algo(), other.LoRA())
		assert.Zero(t, got)
		assert.Contains(t, err.Error(), "another block hash")
		assert.Contains(t, err.Error(), fmt.Sprintf("by xxhash with LoRA %q, this server by %s with LoRA %q", "adapter-1", other.Algo(), other.LoRA()))
	}
}

// TestObserverBlocksAndRead: Blocks lists the announced blocks as of one
// instant, parents first; Read of a listed block the cache has let go of
// since returns false without calling fn, and once the same prefix is
// cached again Read hands fn the block that holds it now. fn's error comes
// back from Read.
func TestObserverBlocksAndRead(t *testing.T) {
	m := modeltest.Load(t, "llama", 7)
	c := engine.DefaultConfig()
	c.BlockSize, c.NumBlocks, c.PrefixCache, c.Audit = 4, 32, radix.New, true
	e, err := engine.New(m, c)
	require.NoError(t, err)
	defer e.Close()
	pool := e.Pool()
	obs := pool.Observe(kvevents.DefaultHashSeed)
	serve := func(id int, p []int32) {
		require.NoError(t, e.Submit(engine.Request{ID: id, Prompt: p, MaxTokens: 1, IgnoreEOS: true}))
		for e.Busy() {
			e.Step()
		}
	}
	p := randomTokens(rand.New(rand.NewPCG(3, 4)), 16, m.Config.VocabSize)
	serve(1, p)

	listed := obs.Blocks()
	require.Len(t, listed, len(p)/c.BlockSize)
	assert.Equal(t, kvevents.BlockHashes(p, c.BlockSize, ""), []kvevents.Hash{listed[0].Hash, listed[1].Hash, listed[2].Hash, listed[3].Hash})
	assert.Nil(t, listed[0].Parent)
	for i, b := range listed[1:] {
		require.NotNil(t, b.Parent)
		assert.Equal(t, listed[i].Hash, *b.Parent, "parents first")
	}

	require.Equal(t, len(listed), pool.Cache().Evict(len(listed)))
	for _, b := range listed {
		ok, err := obs.Read(b, func(int32) error { return fmt.Errorf("fn called for evicted block %d", b.Block) })
		require.NoError(t, err)
		assert.False(t, ok, "block %d was evicted", b.Block)
	}

	serve(2, p)
	for _, b := range listed {
		var got int32 = -1
		ok, err := obs.Read(b, func(block int32) error { got = block; return nil })
		require.NoError(t, err)
		require.True(t, ok, "the prefix is cached again")
		assert.Positive(t, pool.Cache().Holds(got), "fn gets a block the cache holds (block %d)", got)
	}
	boom := fmt.Errorf("boom")
	ok, err := obs.Read(listed[0], func(int32) error { return boom })
	assert.True(t, ok)
	assert.ErrorIs(t, err, boom)
}

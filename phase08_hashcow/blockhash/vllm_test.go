package blockhash_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/kvevents"
	"kvlab/common/kvevents/kveventstest"
	"kvlab/phase08_hashcow/blockhash"
)

// TestVLLMHashKeysAreVLLMs commits each vector's prompt to a cache built
// WithVLLMHash and requires the hash the index keeps for each cached block
// to be vLLM's, byte for byte: block sizes 4 and 16, salted and not, and a
// partial last block, which is not cached. A second sequence then finds
// the whole prompt through those keys.
func TestVLLMHashKeysAreVLLMs(t *testing.T) {
	sizes := map[int]bool{}
	partial := false
	for _, tc := range kveventstest.Load(t).Cases {
		t.Run(tc.Name, func(t *testing.T) {
			sizes[tc.BlockSize] = true
			prompt := make([]int32, len(tc.Tokens))
			for i, v := range tc.Tokens {
				prompt[i] = int32(v)
			}
			h := cachetest.NewHarness(t, factory(blockhash.WithVLLMHash(tc.Seed)), 8, tc.BlockSize)
			c := h.Cache.(*blockhash.Cache)
			h.StartSalted(1, tc.Salt, prompt)
			h.Commit(1)
			pages := slices.Clone(h.Pool.Pages(1))
			full := len(prompt) / tc.BlockSize
			have := make([]string, 0, full)
			for i, b := range pages {
				hash, ok := c.VLLMHash(b)
				if i >= full {
					require.False(t, ok, "block %d holds a partial block: it must not be cached", i)
					partial = true
					continue
				}
				require.True(t, ok, "block %d is full but not cached", i)
				have = append(have, hash.String())
			}
			if d := cmp.Diff(tc.Hashes, have); d != "" {
				t.Fatalf("the index's hashes differ from vLLM's (-vLLM +index):\n%s", d)
			}
			require.Equal(t, full, c.Stats().Blocks)
			h.Release(1)
			require.Equal(t, full*tc.BlockSize, h.StartSalted(2, tc.Salt, prompt), "a second sequence finds the prompt through vLLM's keys")
			if tc.Salt != "" {
				require.Zero(t, h.Start(3, prompt), "the same prompt without the salt")
			}
		})
	}
	require.True(t, sizes[4] && sizes[16] && partial, "vectors for block sizes 4 and 16 and a partial block")
}

// TestVLLMHashEqualsTheEventsHashes runs prompts through a pool whose cache
// is keyed WithVLLMHash and which publishes KV events (kvcache.Observer,
// which computes its hashes on its own): every block the events announce
// must be cached under the very hash announced, and every block the index
// holds must be announced under its own hash — also after evictions.
func TestVLLMHashEqualsTheEventsHashes(t *testing.T) {
	hashers := []kvevents.Hasher{kvevents.NewHasher(kvevents.SHA256CBOR, kvevents.DefaultHashSeed, ""), kvevents.NewHasher(kvevents.SHA256CBOR, "42", "")}
	for _, algo := range kvevents.HashAlgos() {
		hashers = append(hashers, kvevents.NewHasher(algo, "7", "adapter-1"))
	}
	for _, hs := range hashers {
		t.Run(hs.Algo().String()+"/seed="+hs.Seed()+"/lora="+hs.LoRA(), func(t *testing.T) {
			const bs = 4
			h := cachetest.NewHarness(t, factory(blockhash.WithVLLMHasher(hs)), 24, bs)
			c := h.Cache.(*blockhash.Cache)
			obs := h.Pool.ObserveWith(hs)
			system := cachetest.Tokens(1000, 9) // two whole blocks and one token
			prompts := []struct {
				salt   string
				tokens []int32
			}{
				{"", cachetest.Join(system, cachetest.Tokens(10, 6))},
				{"", cachetest.Join(system, cachetest.Tokens(20, 7))},
				{"tenant-a", cachetest.Join(system, cachetest.Tokens(10, 6))},
				{"tenant-b", cachetest.Tokens(300, 16)},
				{"", cachetest.Tokens(300, 16)},
			}
			check := func(when string) {
				t.Helper()
				announced := map[int32]kvevents.Hash{}
				require.NoError(t, obs.Visit(func(cb kvcache.CachedBlock) error {
					announced[cb.Block] = cb.Hash
					return nil
				}))
				indexed := map[int32]kvevents.Hash{}
				for b := range int32(24) {
					if hash, ok := c.VLLMHash(b); ok {
						indexed[b] = hash
					}
				}
				require.NotEmpty(t, indexed, when)
				if d := cmp.Diff(announced, indexed); d != "" {
					t.Fatalf("%s: announced blocks and hashes differ from the index's (-events +index):\n%s", when, d)
				}
			}
			stored := map[kvevents.Hash]bool{}
			for id, p := range prompts {
				h.StartSalted(id, p.salt, p.tokens)
				h.Finish(id)
				events, _ := obs.Drain(false)
				for _, ev := range events {
					for _, hash := range ev.BlockHashes {
						stored[hash] = ev.Type == kvevents.BlockStored
					}
				}
				check("after prompt " + p.salt)
			}
			require.Len(t, stored, 3+2+3+4+4, "distinct hashes stored: the system prompt's two blocks once per salt")
			require.Equal(t, 6, h.Pool.Cache().Evict(6))
			check("after evicting 6 blocks")
		})
	}
}

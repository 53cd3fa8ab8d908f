package main

import (
	"bytes"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/kvevents"
	"kvlab/phase08_hashcow/blockhash"
)

// TestBlockHashVLLMKeysByTheEventsHash checks -block-hash vllm end to end
// through the flag: the cache it builds keys each cached block by vLLM's
// block hash under serve's -kv-hash-seed — the hash a consumer of the KV
// events computes from the same tokens (kvevents.BlockHashes, checked
// against vLLM's own vectors in common/kvevents).
func TestBlockHashVLLMKeysByTheEventsHash(t *testing.T) {
	const bs = 4
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("kv-hash-seed", kvevents.DefaultHashSeed, "")
	build := blockHashFlag(fs)
	require.NoError(t, fs.Parse([]string{"-block-hash", "vllm", "-kv-hash-seed", "42"}))
	f, err := build()
	require.NoError(t, err)
	require.NotNil(t, f)

	h := cachetest.NewHarness(t, cachetest.Factory(f), 16, bs)
	prompt := cachetest.Tokens(7, 3*bs+1)
	h.Start(1, prompt)
	h.Finish(1)
	c := h.Cache.(*blockhash.Cache)
	want := kvevents.ChainHashes(kvevents.RootHash("42"), prompt, bs, "")
	require.Len(t, want, 3, "whole blocks only")
	var have []kvevents.Hash
	for b := range int32(16) {
		if hash, ok := c.VLLMHash(b); ok {
			have = append(have, hash)
		}
	}
	assert.ElementsMatch(t, want, have, "the index's keys are vLLM's hashes under -kv-hash-seed 42")
}

// TestBlockHashFlagServesTheSameTokens runs one small bench per key: the key
// decides only how blocks are found, never what is computed, so every
// table is the default key's.
func TestBlockHashFlagServesTheSameTokens(t *testing.T) {
	dir := t.TempDir()
	v := cli.Variant{Name: "phase08_hashcow", PrefixCache: blockhash.PrefixCache, CacheFlags: blockHashFlag}
	require.Equal(t, 0, cli.Main(v, []string{"init-model", "-out", dir}, io.Discard, io.Discard))
	bench := func(key string) string {
		var o, e bytes.Buffer
		code := cli.Main(v, []string{"bench", "-model", dir, "-quiet", "-clock", "step:50ms",
			"-requests", "6", "-prefix-len", "64", "-suffix-min", "4", "-suffix-max", "16", "-max-tokens", "4", "-block-hash", key}, &o, &e)
		require.Equal(t, 0, code, "-block-hash %s: %s", key, e.String())
		return o.String()
	}
	want := bench("maphash")
	assert.Contains(t, want, "phase08_hashcow")
	for _, key := range []string{"xxhash", "fnv1a", "wordhash", "vllm"} {
		assert.Equal(t, want, bench(key), "-block-hash %s", key)
	}
	var e bytes.Buffer
	assert.Equal(t, 1, cli.Main(v, []string{"bench", "-model", dir, "-quiet", "-block-hash", "nope"}, io.Discard, &e))
	assert.Contains(t, e.String(), "-block-hash")
}

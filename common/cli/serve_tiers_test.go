package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/kvevents"
)

// cachedByTier is usage's prompt_tokens_details.cached_tokens_by_tier.
func cachedByTier(r map[string]any) map[string]float64 {
	out := map[string]float64{}
	d := r["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)
	if m, ok := d["cached_tokens_by_tier"].(map[string]any); ok {
		for k, v := range m {
			out[k] = v.(float64)
		}
	}
	return out
}

// tierPrompt is a greedy request for the twelve tokens from first on.
func tierPrompt(first int) string {
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprint(first + i)
	}
	return `{"prompt": [` + strings.Join(ids, ", ") + `], "max_tokens": 4, "temperature": 0, "ignore_eos": true, "return_token_ids": true}`
}

// TestServeRefusesTierFlagsItCannotHonour: serve -h lists the tier flags;
// a tier without a prefix cache, a negative -cache-ram (llama-server's -1,
// no limit) and a disk tier of no bytes stop serve at start with the
// reason, before a model is loaded.
func TestServeRefusesTierFlagsItCannotHonour(t *testing.T) {
	var help syncBuffer
	require.ErrorIs(t, Serve(context.Background(), cachedVariant, []string{"-h"}, nil, &help), flag.ErrHelp)
	for _, f := range []string{"-cache-ram int", "-cram int", "-cache-disk string", "-cache-disk-size int"} {
		assert.Contains(t, help.String(), "  "+f+"\n", "serve -h")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-cache-ram", "100"}, "-cache-ram needs the prefix cache (-prefix-caching)"},
		{[]string{"-cram", "100"}, "-cache-ram needs the prefix cache (-prefix-caching)"},
		{[]string{"-cache-disk", dir}, "-cache-disk needs the prefix cache (-prefix-caching)"},
		{[]string{"-cache-ram", "100", "-cache-disk", dir}, "-cache-ram and -cache-disk need the prefix cache (-prefix-caching)"},
		{[]string{"-prefix-caching", "-cache-ram", "-1"}, "-cache-ram must be ≥ 0 MiB"},
		{[]string{"-prefix-caching", "-cache-disk", dir, "-cache-disk-size", "0"}, "-cache-disk-size must be > 0 MiB"},
	} {
		err := Serve(context.Background(), cachedVariant, append([]string{"-port", "0", "-model", "/nonexistent"}, tc.args...), nil, &syncBuffer{})
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.says, tc.args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused start writes nothing into -cache-disk")
}

// TestServeCacheRAMServesWhatThePoolEvicted: on a pool of eight blocks,
// three other prompts evict the first one's blocks; with -cache-ram they
// went to host memory, and the first prompt sent again is answered with
// its blocks copied back from there (cached_tokens_by_tier["CPU"]) and
// the same greedy tokens and text as a server without a cache. /metrics
// shows the tier.
func TestServeCacheRAMServesWhatThePoolEvicted(t *testing.T) {
	dir := smallModel(t, "llama")
	small := []string{"-model", dir, "-block-size", "4", "-blocks", "8"}
	plainURL, stopPlain, plainDone, plainLog := startServe(t, cachedVariant, small...)
	url, stop, done, log := startServe(t, cachedVariant, append(small, "-prefix-caching", "-cache-ram", "1")...)
	assert.Contains(t, log.String(), "cache tiers under the prefix cache: CPU")

	want := completion(t, plainURL, tierPrompt(1))
	first := completion(t, url, tierPrompt(1))
	assert.Empty(t, cachedByTier(first)["CPU"])
	for _, p := range []int{101, 151, 201} {
		completion(t, url, tierPrompt(p))
	}
	again := completion(t, url, tierPrompt(1))
	assert.Positive(t, cachedByTier(again)["CPU"], "the evicted prefix comes back from host memory: %v", again["usage"])
	for _, got := range []map[string]any{first, again} {
		assert.Equal(t, tokenIDs(want), tokenIDs(got))
		assert.Equal(t, want["choices"].([]any)[0].(map[string]any)["text"], got["choices"].([]any)[0].(map[string]any)["text"])
	}

	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(metrics), `kvlab:tier_hits_total{tier="CPU"}`)
	assert.NotContains(t, string(metrics), `kvlab:tier_hits_total{tier="CPU"} 0`)

	stop()
	require.NoError(t, <-done, log.String())
	assert.Contains(t, log.String(), "cache tiers: CPU held")
	stopPlain()
	require.NoError(t, <-plainDone, plainLog.String())
}

// TestServeCacheDiskSurvivesARestart: serve with -cache-disk, alone or
// under -cache-ram, answers a prompt, stops, starts again on the same
// directory, and answers the prompt again with its blocks read from the
// disk (cached_tokens_by_tier["DISK"]) and the same tokens: the shutdown
// flushed the pool into the first tier and drained host memory down.
func TestServeCacheDiskSurvivesARestart(t *testing.T) {
	dir := smallModel(t, "llama")
	for _, tc := range []struct {
		name  string
		flags []string
		log   string
	}{
		{"disk", nil, "KV blocks from the pool into DISK; DISK holds 3 blocks"},
		{"ram over disk", []string{"-cache-ram", "1"}, "from the pool into CPU, drained "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cacheDisk := t.TempDir()
			args := append([]string{"-model", dir, "-block-size", "4", "-prefix-caching", "-cache-disk", cacheDisk}, tc.flags...)
			url, stop, done, log := startServe(t, cachedVariant, args...)
			cold := completion(t, url, tierPrompt(1))
			assert.Empty(t, cachedByTier(cold)["DISK"])
			stop()
			require.NoError(t, <-done, log.String())
			assert.Contains(t, log.String(), tc.log)

			url, stop, done, log = startServe(t, cachedVariant, args...)
			warm := completion(t, url, tierPrompt(1))
			assert.Equal(t, 12.0, cachedByTier(warm)["DISK"], "the prompt's three blocks come from the disk: %v\n%s", warm["usage"], log)
			assert.Equal(t, tokenIDs(cold), tokenIDs(warm))
			stop()
			require.NoError(t, <-done, log.String())
		})
	}
}

// TestServeCacheDiskNamesBlocksAsTheObserver: the disk tier keeps its files
// under the identity a -cache-dir file of the same server carries — the
// model's fingerprint, the pool's block size, layers, KV width and dtype,
// -prefix-caching-hash-algo, -lora-name — and -kv-hash-seed, and each file
// is a cache file of that identity; a restart with the same flags finds
// them, one with another seed looks in another subdirectory and starts
// cold.
func TestServeCacheDiskNamesBlocksAsTheObserver(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDisk := t.TempDir()
	hashFlags := []string{"-prefix-caching-hash-algo", "xxhash", "-lora-name", "adapter", "-kv-cache-dtype", "bf16"}
	args := append([]string{"-model", dir, "-block-size", "4", "-prefix-caching", "-cache-disk", cacheDisk}, hashFlags...)
	url, stop, done, log := startServe(t, cachedVariant, append(args, "-kv-hash-seed", "7")...)
	cold := completion(t, url, tierPrompt(1))
	stop()
	require.NoError(t, <-done, log.String())

	fp, err := cachefile.ModelFingerprint(dir)
	require.NoError(t, err)
	var algo kvevents.HashAlgo
	require.NoError(t, algo.UnmarshalText([]byte("xxhash")))
	id := cachefile.Identity{Model: fp, BlockSize: 4, Layers: 2, KVDim: 2 * 16, DType: "bfloat16", HashAlgo: algo, LoRA: "adapter"}
	files, err := filepath.Glob(filepath.Join(cacheDisk, cachefile.IdentityDir(id, "7"), "*"+cachefile.BlockExt))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the block files are where a server of this identity and seed looks")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		hdr, recs, err := cachefile.Scan(bytes.NewReader(raw), int64(len(raw)), id)
		require.NoError(t, err, f)
		assert.Equal(t, "7", hdr.Seed)
		assert.Len(t, recs, 1)
	}

	url, stop, done, log = startServe(t, cachedVariant, append(args, "-kv-hash-seed", "7")...)
	warm := completion(t, url, tierPrompt(1))
	assert.Equal(t, 12.0, cachedByTier(warm)["DISK"], "%v", warm["usage"])
	assert.Equal(t, tokenIDs(cold), tokenIDs(warm))
	stop()
	require.NoError(t, <-done, log.String())

	url, stop, done, log = startServe(t, cachedVariant, append(args, "-kv-hash-seed", "8")...)
	other := completion(t, url, tierPrompt(1))
	assert.Zero(t, cachedByTier(other)["DISK"], "another seed names other blocks")
	stop()
	require.NoError(t, <-done, log.String())
}

// TestGenerateCacheDiskAcrossRuns: generate leaves its prompt's blocks on
// -cache-disk at exit, and the next generate of the same prompt reads
// them from there and prints the same tokens.
func TestGenerateCacheDiskAcrossRuns(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDisk := t.TempDir()
	gen := func() (stdout, stderr string) {
		var o, e bytes.Buffer
		code := Main(cachedVariant, []string{"generate", "-model", dir, "-block-size", "4", "-prompt", "1,2,3,4,5,6,7,8,9,10,11,12",
			"-max-tokens", "4", "-ignore-eos", "-cache-disk", cacheDisk}, &o, &e)
		require.Equal(t, 0, code, e.String())
		return o.String(), e.String()
	}
	coldOut, coldLog := gen()
	assert.Contains(t, coldLog, "0 from DISK")
	assert.Contains(t, coldLog, "cache tiers: flushed ")
	warmOut, warmLog := gen()
	assert.Contains(t, warmLog, "12 from DISK", "the prompt's three blocks come from the disk")
	var cold, warm generateOutput
	require.NoError(t, json.Unmarshal([]byte(coldOut), &cold))
	require.NoError(t, json.Unmarshal([]byte(warmOut), &warm))
	assert.Equal(t, cold.Tokens, warm.Tokens)

	var e bytes.Buffer
	code := Main(cachedVariant, []string{"generate", "-model", dir, "-prompt", "1,2", "-no-cache", "-cache-ram", "10"}, io.Discard, &e)
	assert.Equal(t, 1, code)
	assert.Contains(t, e.String(), "-cache-ram needs the prefix cache (drop -no-cache)")
}

// TestServeFailsWhenTheTiersCannotBeFlushed: a -cache-disk whose tier
// subdirectory is gone at shutdown (a file stands in the directory's
// place) makes serve return the flush's error, so the process exits
// non-zero, as a failed -cache-dir save does, instead of stopping as if
// the cache were on the disk.
func TestServeFailsWhenTheTiersCannotBeFlushed(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDisk := filepath.Join(t.TempDir(), "disk")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching", "-cache-disk", cacheDisk)
	completion(t, url, tierPrompt(1))
	require.NoError(t, os.RemoveAll(cacheDisk))
	require.NoError(t, os.WriteFile(cacheDisk, []byte("not a directory"), 0o644))
	stop()
	err := <-done
	require.Error(t, err, log.String())
	assert.ErrorContains(t, err, "flushing the cache tiers")
	assert.ErrorContains(t, err, "could not be written")
}

// TestBenchCacheDiskAcrossRuns: bench -compare on a pool that evicts
// leaves the cache's blocks on -cache-disk at exit (the baseline, which
// has no prefix cache, gets no tier), the next run starts with them
// there, and both runs give the baseline's tokens. With -url the tiers
// would be the server's, and are refused.
func TestBenchCacheDiskAcrossRuns(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDisk := t.TempDir()
	bench := func() string {
		var o, e bytes.Buffer
		code := Main(cachedVariant, []string{"bench", "-model", dir, "-block-size", "4", "-blocks", "32", "-requests", "6", "-prefix-len", "24",
			"-suffix-min", "4", "-suffix-max", "8", "-clock", "step:5ms", "-quiet", "-compare", "-cache-ram", "1", "-cache-disk", cacheDisk}, &o, &e)
		require.Equal(t, 0, code, e.String())
		assert.Contains(t, o.String(), "generated exactly the baseline's tokens")
		assert.Equal(t, 1, strings.Count(e.String(), "cache tiers under the prefix cache"), "only the cache's engine has tiers")
		return e.String()
	}
	first := bench()
	assert.Contains(t, first, ", 0 blocks there")
	assert.Contains(t, first, "cache tiers: flushed ")
	second := bench()
	assert.NotContains(t, second, ", 0 blocks there", "the first run's blocks are on the disk")

	var e bytes.Buffer
	code := Main(cachedVariant, []string{"bench", "-url", "http://127.0.0.1:1", "-cache-ram", "10"}, io.Discard, &e)
	assert.Equal(t, 1, code)
	assert.Contains(t, e.String(), "-cache-ram tiers an engine in this process")
}

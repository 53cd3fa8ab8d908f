package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/server"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
)

// designVariants are the three cache designs as serve runs them.
var designVariants = []Variant{
	cachedVariant,
	{Name: "testblockhash", Summary: "test", PrefixCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs) }},
	{Name: "testtrie", Summary: "test", PrefixCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return trie.New(a, bs, trie.DeepestFirst) }},
}

const filesBody = `{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "max_tokens": 2, "temperature": 0, "ignore_eos": true}`

// savedCacheFile serves model dir with -cache-dir cacheDir, answers one
// request, stops, and returns the file the shutdown saved.
func savedCacheFile(t *testing.T, dir, cacheDir string) []byte {
	t.Helper()
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir)
	completion(t, url, filesBody)
	stop()
	require.NoError(t, <-done, log.String())
	raw, err := os.ReadFile(filepath.Join(cacheDir, server.CacheFileName))
	require.NoError(t, err)
	return raw
}

// wrappingCount rewrites the valid cache file raw, which holds at least one
// block, into one with the same header but a block count whose product
// with the record size wraps around to the bytes after the header, and a
// checksum that holds: a reader that trusts the product allocates an
// impossible number of blocks.
func wrappingCount(t *testing.T, raw []byte) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(raw[8:]))
	var hdr map[string]any
	require.NoError(t, json.Unmarshal(raw[12:12+n], &hdr))
	blocks := int64(hdr["blocks"].(float64))
	require.Positive(t, blocks)
	rec := int64(len(raw)-12-n-sha256.Size) / blocks
	k := 0
	for rec>>k&1 == 0 {
		k++
	}
	mod := new(big.Int).Lsh(big.NewInt(1), uint(64-k))
	inv := new(big.Int).ModInverse(big.NewInt(rec>>k), mod)
	for body := int64(1) << k; body < 1<<20; body += 1 << k {
		count := new(big.Int).Mul(big.NewInt(body>>k), inv)
		count.Mod(count, mod)
		if !count.IsInt64() || count.Int64() <= body {
			continue
		}
		hdr["blocks"] = count.Int64()
		h, err := json.Marshal(hdr)
		require.NoError(t, err)
		f := append([]byte("KVLABKV1"), binary.LittleEndian.AppendUint32(nil, uint32(len(h)))...)
		f = append(append(f, h...), make([]byte, body)...)
		sum := sha256.Sum256(f)
		return append(f, sum[:]...)
	}
	t.Fatal("no body length gives a wrapping count")
	return nil
}

// refusedFiles returns the files a start set aside in cacheDir.
func refusedFiles(t *testing.T, cacheDir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(cacheDir, server.CacheFileName+".refused-*"))
	require.NoError(t, err)
	return m
}

// TestServeSetsARefusedCacheFileAside: a -cache-dir file with a valid
// checksum and a block count that wraps around is refused at start in each
// design — the log says why and where the file went, the server serves
// from an empty cache — and the file is kept aside byte for byte; the
// shutdown then saves a fresh file under the name.
func TestServeSetsARefusedCacheFileAside(t *testing.T) {
	dir := smallModel(t, "llama")
	crafted := wrappingCount(t, savedCacheFile(t, dir, t.TempDir()))
	for _, v := range designVariants {
		t.Run(v.Name, func(t *testing.T) {
			cacheDir := t.TempDir()
			path := filepath.Join(cacheDir, server.CacheFileName)
			require.NoError(t, os.WriteFile(path, crafted, 0o644))
			url, stop, done, log := startServe(t, v, "-model", dir, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir)
			assert.Contains(t, log.String(), "the header announces")
			assert.Contains(t, log.String(), "kept as")
			assert.Contains(t, log.String(), "starting with an empty cache")
			assert.Zero(t, cachedTokens(completion(t, url, filesBody)))
			stop()
			require.NoError(t, <-done, log.String())

			aside := refusedFiles(t, cacheDir)
			require.Len(t, aside, 1)
			kept, err := os.ReadFile(aside[0])
			require.NoError(t, err)
			assert.True(t, bytes.Equal(crafted, kept), "the refused file is kept byte for byte")
			fresh, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.False(t, bytes.Equal(crafted, fresh), "the shutdown saved a fresh file")
		})
	}
}

// TestServeWithAnotherModelKeepsTheSavedCache: one start with another
// model on a -cache-dir refuses its file, and the shutdown does not wipe
// it: the file is kept aside byte for byte, and a start that moves it back
// restores it.
func TestServeWithAnotherModelKeepsTheSavedCache(t *testing.T) {
	a, b := smallModel(t, "llama"), smallModel(t, "qwen3")
	cacheDir := t.TempDir()
	path := filepath.Join(cacheDir, server.CacheFileName)
	saved := savedCacheFile(t, a, cacheDir)

	url, stop, done, log := startServe(t, cachedVariant, "-model", b, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir)
	assert.Contains(t, log.String(), "written for another configuration")
	completion(t, url, filesBody)
	stop()
	require.NoError(t, <-done, log.String())

	aside := refusedFiles(t, cacheDir)
	require.Len(t, aside, 1)
	kept, err := os.ReadFile(aside[0])
	require.NoError(t, err)
	require.True(t, bytes.Equal(saved, kept), "model a's file is kept byte for byte")

	require.NoError(t, os.Rename(aside[0], path))
	url, stop, done, log = startServe(t, cachedVariant, "-model", a, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir)
	assert.Contains(t, log.String(), "restored ")
	assert.Equal(t, 8.0, cachedTokens(completion(t, url, filesBody)), "model a's blocks are back")
	stop()
	require.NoError(t, <-done, log.String())
}

// TestServeFailsWhenTheShutdownSaveFails: a -cache-dir that is gone at
// shutdown (a file stands in its place) makes serve return the save's
// error, so the process exits non-zero, instead of stopping as if the
// cache were safe.
func TestServeFailsWhenTheShutdownSaveFails(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir)
	completion(t, url, filesBody)
	require.NoError(t, os.RemoveAll(cacheDir))
	require.NoError(t, os.WriteFile(cacheDir, []byte("not a directory"), 0o644))
	stop()
	err := <-done
	require.Error(t, err, log.String())
	assert.ErrorContains(t, err, "saving the cache")
}

// TestServeRemovesStaleTempFiles: the temporary files a killed save left
// in -cache-dir and -slot-save-path are removed at start, and nothing
// else is.
func TestServeRemovesStaleTempFiles(t *testing.T) {
	dir := smallModel(t, "llama")
	cacheDir, slots := t.TempDir(), t.TempDir()
	stale := []string{filepath.Join(cacheDir, ".kvcache-1234"), filepath.Join(slots, ".kvcache-5678")}
	for _, p := range append(stale, filepath.Join(slots, "keep.bin")) {
		require.NoError(t, os.WriteFile(p, []byte("left over"), 0o644))
	}
	_, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching", "-cache-dir", cacheDir, "-slot-save-path", slots)
	assert.Contains(t, log.String(), "removed .kvcache-1234")
	for _, p := range stale {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}
	_, err := os.Stat(filepath.Join(slots, "keep.bin"))
	assert.NoError(t, err, "a slot file is not a temporary file")
	stop()
	require.NoError(t, <-done, log.String())
}

// TestServeSlotSaveMaxBytes: -slot-save-max-bytes reaches the slot saves
// (a budget smaller than any file refuses every save with 507), and a
// negative one is refused at start.
func TestServeSlotSaveMaxBytes(t *testing.T) {
	dir := smallModel(t, "llama")
	slots := t.TempDir()
	url, stop, done, log := startServe(t, cachedVariant, "-model", dir, "-block-size", "4", "-prefix-caching", "-slot-save-path", slots, "-slot-save-max-bytes", "100")
	resp, err := testClient.Post(url+"/completion", "application/json", strings.NewReader(`{"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9], "n_predict": 1, "id_slot": 0}`))
	require.NoError(t, err)
	resp.Body.Close()
	resp, err = testClient.Post(url+"/slots/0?action=save", "application/json", strings.NewReader(`{"filename": "a.bin"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode)
	stop()
	require.NoError(t, <-done, log.String())

	err = Serve(context.Background(), cachedVariant, []string{"-model", dir, "-port", "0", "-prefix-caching", "-slot-save-path", slots, "-slot-save-max-bytes", "-1"}, nil, &syncBuffer{})
	assert.ErrorContains(t, err, "-slot-save-max-bytes must be ≥ 0")
}

package server

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

var designs = []struct {
	name string
	new  func(a *kvcache.Allocator, bs int) kvcache.PrefixCache
}{
	{"radix", radix.New},
	{"blockhash", func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs) }},
	{"trie", func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return trie.New(a, bs, trie.DeepestFirst) }},
}

// observed is an engine with its observer and the cache file it would use.
func observed(t *testing.T, tm testModel, cfg engine.Config, path, fingerprint string) (*engine.Engine, *CacheFile) {
	t.Helper()
	e, err := engine.New(tm.m, cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	p := e.Pool()
	return e, &CacheFile{
		Path:     path,
		Identity: CacheIdentity{Model: fingerprint, BlockSize: p.BlockSize(), Layers: p.Layers(), KVDim: p.KVDim(), DType: "float32"},
		Pool:     p,
		Observer: p.Observe(kvevents.DefaultHashSeed),
		Seed:     kvevents.DefaultHashSeed,
	}
}

// runOne serves r alone and returns its tokens, the logits of each, and the
// prompt tokens it found cached.
func runOne(t *testing.T, e *engine.Engine, r engine.Request) (toks []int32, logits [][]float32, cached int) {
	t.Helper()
	r.KeepLogits = true
	require.NoError(t, e.Submit(r))
	for e.Busy() {
		for _, o := range e.Step() {
			require.NoError(t, o.Err)
			toks, logits, cached = append(toks, o.Token), append(logits, o.Logits), o.Cached
		}
	}
	return toks, logits, cached
}

// TestCacheFileRestoreIsBitIdentical saves what one engine cached and
// restores it into a fresh engine of each design: the same request then
// finds its prompt cached and produces the same tokens from bit-identical
// logits as a cold run on an engine that never saw the file.
func TestCacheFileRestoreIsBitIdentical(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	prompt := make([]int32, 30)
	for i := range prompt {
		prompt[i] = int32(7*i%500 + 1)
	}
	req := engine.Request{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true}

	cfg := engineConfig(true)
	src, file := observed(t, tm, cfg, path, "model-a")
	coldToks, coldLogits, cached := runOne(t, src, req)
	require.Zero(t, cached)
	n, err := file.Save()
	require.NoError(t, err)
	require.Equal(t, file.Observer.Announced(), n)
	require.GreaterOrEqual(t, n, len(prompt)/cfg.BlockSize)

	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			c := cfg
			c.PrefixCache = d.new
			dst, file := observed(t, tm, c, path, "model-a")
			restored, err := file.Restore()
			require.NoError(t, err)
			assert.Equal(t, n, restored)
			require.NoError(t, dst.Pool().Audit().Err())

			toks, logits, cached := runOne(t, dst, req)
			assert.Equal(t, len(prompt)/c.BlockSize*c.BlockSize, cached, "every whole block of the prompt comes from the file")
			assert.Equal(t, coldToks, toks)
			require.Len(t, logits, len(coldLogits))
			for i := range logits {
				for j := range logits[i] {
					if math.Float32bits(logits[i][j]) != math.Float32bits(coldLogits[i][j]) {
						t.Fatalf("token %d: logit %d is %v, the cold run's %v", i, j, logits[i][j], coldLogits[i][j])
					}
				}
			}
		})
	}
}

// TestCacheFileLeavesSaltedBlocksOut: the file records no salts, and a
// restore commits to the unsalted cache, so a block a tenant cached under
// its salt must never be written — or a restart would serve one tenant's
// prompt to everyone. Saving after a salted request writes nothing; after
// an unsalted request of another prompt, exactly that prompt's blocks; and
// a restored engine does not find the salted prompt unsalted.
func TestCacheFileLeavesSaltedBlocksOut(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	cfg := engineConfig(true)
	secret, public := prompt(24, 1), prompt(24, 2)
	src, file := observed(t, tm, cfg, path, "model-a")
	runOne(t, src, engine.Request{ID: 1, Prompt: secret, MaxTokens: 2, IgnoreEOS: true, CacheSalt: "tenant-a"})
	n, err := file.Save()
	require.NoError(t, err)
	assert.Zero(t, n, "a salted request's blocks must not be saved")

	runOne(t, src, engine.Request{ID: 2, Prompt: public, MaxTokens: 2, IgnoreEOS: true})
	n, err = file.Save()
	require.NoError(t, err)
	assert.Equal(t, len(public)/cfg.BlockSize, n, "the unsalted prompt's whole blocks, and nothing of the salted one")

	dst, file := observed(t, tm, cfg, path, "model-a")
	_, err = file.Restore()
	require.NoError(t, err)
	_, _, cached := runOne(t, dst, engine.Request{ID: 3, Prompt: secret, MaxTokens: 1, IgnoreEOS: true})
	assert.Zero(t, cached, "after a restart, the salted prompt is not there for an unsalted reader")
	_, _, cached = runOne(t, dst, engine.Request{ID: 4, Prompt: public, MaxTokens: 1, IgnoreEOS: true})
	assert.Equal(t, len(public)/cfg.BlockSize*cfg.BlockSize, cached, "the unsalted prompt is")
}

// TestCacheFileRestoresSharedPrefixesOnce saves two prompts that share
// their first blocks: a restore writes each distinct block once (the second
// chain finds the shared blocks already restored and writes only its own),
// and both prompts are found whole afterwards.
func TestCacheFileRestoresSharedPrefixesOnce(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	cfg := engineConfig(true)
	shared := prompt(16, 3)
	a := slices.Concat(shared, []int32{5, 6, 7, 8, 9, 10, 11, 12})
	b := slices.Concat(shared, []int32{20, 21, 22, 23, 24, 25, 26, 27})
	src, file := observed(t, tm, cfg, path, "model-a")
	runOne(t, src, engine.Request{ID: 1, Prompt: a, MaxTokens: 1, IgnoreEOS: true})
	runOne(t, src, engine.Request{ID: 2, Prompt: b, MaxTokens: 1, IgnoreEOS: true})
	n, err := file.Save()
	require.NoError(t, err)
	distinct := (len(shared) + 2*(len(a)-len(shared))) / cfg.BlockSize
	require.Equal(t, distinct, n, "the shared blocks are saved once")

	dst, file := observed(t, tm, cfg, path, "model-a")
	restored, err := file.Restore()
	require.NoError(t, err)
	assert.Equal(t, distinct, restored, "each distinct block is written once")
	require.NoError(t, dst.Pool().Audit().Err())
	for i, p := range [][]int32{a, b} {
		_, _, cached := runOne(t, dst, engine.Request{ID: 10 + i, Prompt: p, MaxTokens: 1, IgnoreEOS: true})
		assert.Equal(t, len(p), cached, "prompt %d is found whole", i)
	}
}

// TestCacheFileChecksEveryRecordsHash tampers with one token of a saved
// block and recomputes the file's checksum, as a careless tool (or an
// attacker) would: the per-record hash check must still refuse the file,
// or the restored block would be served for a prefix whose KV it does not
// hold.
func TestCacheFileChecksEveryRecordsHash(t *testing.T) {
	tm := loadTestModel(t)
	path := filepath.Join(t.TempDir(), CacheFileName)
	cfg := engineConfig(true)
	src, file := observed(t, tm, cfg, path, "model-a")
	runOne(t, src, engine.Request{ID: 1, Prompt: prompt(24, 4), MaxTokens: 1, IgnoreEOS: true})
	_, err := file.Save()
	require.NoError(t, err)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	body := raw[:len(raw)-sha256.Size]
	// The first record starts after the magic, the header's length and the
	// header; its tokens after the 32-byte hash, the parent flag and the
	// 32-byte parent.
	hdr := int(binary.LittleEndian.Uint32(body[len(cachefile.Magic):]))
	token := len(cachefile.Magic) + 4 + hdr + 65
	body[token] ^= 1
	sum := sha256.Sum256(body)
	require.NoError(t, os.WriteFile(path, append(body, sum[:]...), 0o644))

	dst, file := observed(t, tm, cfg, path, "model-a")
	restored, err := file.Restore()
	require.ErrorContains(t, err, "its hash is not the hash of its tokens")
	assert.Zero(t, restored)
	assert.Zero(t, dst.Pool().Cache().Stats().Blocks, "nothing restored from a refused file")
}

// TestCacheFileRefusals: a file from another model or another block size,
// a corrupt one and a truncated one are refused whole, with an error that
// says why, and the pool stays empty.
func TestCacheFileRefusals(t *testing.T) {
	tm := loadTestModel(t)
	dir := t.TempDir()
	good := filepath.Join(dir, CacheFileName)
	src, file := observed(t, tm, engineConfig(true), good, "model-a")
	runOne(t, src, engine.Request{ID: 1, Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, MaxTokens: 2, IgnoreEOS: true})
	_, err := file.Save()
	require.NoError(t, err)
	raw, err := os.ReadFile(good)
	require.NoError(t, err)

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 0x40
	bs8 := engineConfig(true)
	bs8.BlockSize = 8

	for _, c := range []struct {
		name, path, model string
		cfg               engine.Config
		want              string
	}{
		{"another model", good, "model-b", engineConfig(true), "written for another configuration"},
		{"another block size", good, "model-a", bs8, "block size 4"},
		{"corrupt", write("corrupt.bin", flipped), "model-a", engineConfig(true), "checksum mismatch"},
		{"truncated", write("truncated.bin", raw[:len(raw)-100]), "model-a", engineConfig(true), "checksum mismatch"},
		{"cut to nothing", write("short.bin", raw[:20]), "model-a", engineConfig(true), "truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, f := observed(t, tm, c.cfg, c.path, c.model)
			n, err := f.Restore()
			require.Error(t, err)
			assert.ErrorContains(t, err, c.want)
			assert.ErrorContains(t, err, "refusing "+c.path)
			assert.Zero(t, n)
			assert.Zero(t, e.Pool().UsedBlocks(), "nothing was restored")
			assert.Zero(t, f.Observer.Announced())
		})
	}

	_, f := observed(t, tm, engineConfig(true), filepath.Join(dir, "none.bin"), "model-a")
	_, err = f.Restore()
	assert.ErrorIs(t, err, ErrNoCacheFile)
}

// TestModelFingerprint tells two synthetic models of one architecture
// apart (different seeds: same config.json, different weights).
func TestModelFingerprint(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, model.WriteSynthetic(a, modeltest.Options(model.ArchLlama, 5)))
	require.NoError(t, model.WriteSynthetic(b, modeltest.Options(model.ArchLlama, 6)))
	fa, err := ModelFingerprint(a)
	require.NoError(t, err)
	fa2, err := ModelFingerprint(a)
	require.NoError(t, err)
	fb, err := ModelFingerprint(b)
	require.NoError(t, err)
	assert.Equal(t, fa, fa2)
	assert.NotEqual(t, fa, fb)
	_, err = ModelFingerprint(filepath.Join(dir, "missing"))
	assert.Error(t, err)
}

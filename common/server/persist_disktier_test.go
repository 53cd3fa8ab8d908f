package server

import (
	"hash/crc32"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
)

// TestCacheFileRestoresADiskTierFile: the file a disk tier keeps a block
// in is a cache file like the ones --cache-dir holds: CacheFile restores
// the first block of a prompt from it into a fresh engine of each design,
// which then finds that block cached and produces the cold run's tokens
// from bit-identical logits.
func TestCacheFileRestoresADiskTierFile(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	req := engine.Request{ID: 1, Prompt: prompt(2*cfg.BlockSize+1, 12), MaxTokens: 4, IgnoreEOS: true}
	src, file := observedAs(t, tm, cfg, "")
	coldToks, coldLogits, _ := runOne(t, src, req)

	disk, err := cachefile.OpenDiskTier(cachefile.DiskTierConfig{Dir: t.TempDir(), Capacity: 1 << 20, Identity: file.Identity, Seed: file.Seed})
	require.NoError(t, err)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	p := src.Pool()
	blocks := file.Observer.Blocks()
	require.GreaterOrEqual(t, len(blocks), len(req.Prompt)/cfg.BlockSize)
	for _, b := range blocks {
		ok, err := file.Observer.Read(b, func(block int32) error {
			var kv []byte
			for l := range p.Layers() {
				kv = p.AppendBlock(kv, l, block, nil)
			}
			disk.Put(kvcache.TierBlock{Hash: b.Hash, Parent: b.Parent, Tokens: b.Tokens, KV: kv, Sum: crc32.Checksum(kv, castagnoli)})
			return nil
		})
		require.True(t, ok)
		require.NoError(t, err)
	}
	require.NoError(t, disk.Close())
	require.Equal(t, len(blocks), disk.Stats().Puts)
	root := file.Observer.Hasher().BlockHashes(req.Prompt, cfg.BlockSize, "")[0]
	path := filepath.Join(disk.Dir(), root.String()+cachefile.BlockExt)

	for _, d := range designs {
		t.Run(d.name, func(t *testing.T) {
			c := cfg
			c.PrefixCache = d.new
			dst, f := observedAs(t, tm, c, path)
			n, err := f.Restore()
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			toks, logits, cached := runOne(t, dst, req)
			assert.Equal(t, cfg.BlockSize, cached, "the restored block is the prompt's first")
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

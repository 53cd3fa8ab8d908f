package server

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/kernels"
)

// TestCacheFileKeepsThePoolsDType saves a 16-bit pool's cache and restores
// it: the file holds the KV in the pool's own dtype (two bytes a value in
// a 16-bit file's records, four in a float32 one's), the restored engine reproduces the cold run of
// that dtype bit for bit, and a file written under one dtype is refused by
// a pool of another, with an error that names both.
func TestCacheFileKeepsThePoolsDType(t *testing.T) {
	tm := loadTestModel(t)
	dir := t.TempDir()
	prompt := make([]int32, 30)
	for i := range prompt {
		prompt[i] = int32(5*i%500 + 2)
	}
	req := engine.Request{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true}
	for _, dt := range kernels.KVDTypes {
		path := filepath.Join(dir, dt.String(), CacheFileName)
		cfg := engineConfig(true)
		cfg.KVCacheDType = dt
		src, file := observedAs(t, tm, cfg, path)
		coldToks, coldLogits, _ := runOne(t, src, req)
		n, err := file.Save()
		require.NoError(t, err)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		// magic, header length and header, n records, checksum
		hdr := int(binary.LittleEndian.Uint32(raw[len(cachefile.Magic):]))
		bs, l, w := cfg.BlockSize, tm.m.Config.NumHiddenLayers, tm.m.Config.KVDim()
		record := 32 + 1 + 32 + 4*bs + l*2*bs*w*dt.Bytes()
		require.Equal(t, len(cachefile.Magic)+4+hdr+n*record+32, len(raw), "%v: %d records of %d bytes", dt, n, record)

		dst, file := observedAs(t, tm, cfg, path)
		restored, err := file.Restore()
		require.NoError(t, err)
		require.Equal(t, n, restored)
		toks, logits, cached := runOne(t, dst, req)
		require.Equal(t, len(prompt)/cfg.BlockSize*cfg.BlockSize, cached, "%v: the prompt's whole blocks come from the file", dt)
		require.Equal(t, coldToks, toks, "%v", dt)
		for i := range logits {
			for j := range logits[i] {
				if math.Float32bits(logits[i][j]) != math.Float32bits(coldLogits[i][j]) {
					t.Fatalf("%v token %d: logit %d is %v, the cold run's %v", dt, i, j, logits[i][j], coldLogits[i][j])
				}
			}
		}

		for _, other := range kernels.KVDTypes {
			if other == dt {
				continue
			}
			c := cfg
			c.KVCacheDType = other
			e, f := observedAs(t, tm, c, path)
			_, err := f.Restore()
			require.ErrorContains(t, err, "written for another configuration", "a %v file into a %v pool", dt, other)
			assert.ErrorContains(t, err, dt.Name())
			assert.ErrorContains(t, err, other.Name())
			assert.Zero(t, e.Pool().UsedBlocks())
		}
	}
}

// observedAs is observed with the identity naming the pool's dtype, as
// serve's does.
func observedAs(t *testing.T, tm testModel, cfg engine.Config, path string) (*engine.Engine, *CacheFile) {
	e, f := observed(t, tm, cfg, path, "model-a")
	f.Identity.DType = e.Pool().DType().Name()
	return e, f
}

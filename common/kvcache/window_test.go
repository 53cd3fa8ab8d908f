package kvcache_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/workload"
)

// TestWindowBlocks checks the count against a position-by-position walk:
// a block is held when any position in it is inside the last query's
// window.
func TestWindowBlocks(t *testing.T) {
	for _, bs := range []int{1, 4, 16} {
		for _, w := range []int{0, 1, 3, 4, 8, 16, 17, 40} {
			for n := 0; n <= 70; n++ {
				held := map[int]bool{}
				for p := 0; p < n; p++ {
					if w == 0 || p >= n-w {
						held[p/bs] = true
					}
				}
				require.Equal(t, len(held), kvcache.WindowBlocks(n, bs, w), "n %d block %d window %d", n, bs, w)
			}
		}
	}
	keep, freed := kvcache.LayerBlocks(100, 16, []int{8, 8, 0})
	assert.Equal(t, 21, keep)     // 3 layers × 7 blocks
	assert.Equal(t, 2+2+7, freed) // positions 92…99 span blocks 5 and 6
}

// TestWindowWastePrefixCaching measures what keeping every block costs on
// the prefix_caching workload (full size, as `make phase08 MODEL=gemma3`
// runs it) with the built-in Gemma-3 and the engine's default 16-token
// blocks: each request's complete sequence (prompt + its max_tokens, which
// it generates: the benchmarks ignore EOS), its KV over all layers with
// every block kept and with local layers' out-of-window blocks freed.
// Run with -v for the numbers docs/gemma3.md quotes.
func TestWindowWastePrefixCaching(t *testing.T) {
	opts, err := model.BuiltinFor("gemma3")
	require.NoError(t, err)
	cfg, err := opts.Config()
	require.NoError(t, err)
	windows := make([]int, cfg.NumHiddenLayers)
	for l := range windows {
		windows[l] = cfg.LayerWindow(l)
	}
	p := workload.DefaultParams("prefix_caching")
	p.Vocab = cfg.VocabSize
	reqs, err := workload.Generate("prefix_caching", p)
	require.NoError(t, err)
	const blockSize = 16
	blockBytes := int64(blockSize * 2 * cfg.KVDim() * 4) // one layer's K and V, float32
	var keep, freed, tokens int
	for _, r := range reqs {
		n := len(r.Prompt) + r.MaxTokens
		k, f := kvcache.LayerBlocks(n, blockSize, windows)
		keep, freed, tokens = keep+k, freed+f, tokens+n
	}
	n := len(reqs)
	keepKiB := float64(int64(keep)*blockBytes) / float64(n) / 1024
	freedKiB := float64(int64(freed)*blockBytes) / float64(n) / 1024
	t.Logf("%d requests, %.1f tokens each on average; windows %v; block %d tokens, %d bytes a layer",
		n, float64(tokens)/float64(n), windows, blockSize, blockBytes)
	t.Logf("KV per request: every block kept %.1f KiB (%.1f blocks over all layers); out-of-window blocks freed %.1f KiB (%.1f blocks): %.1f%%",
		keepKiB, float64(keep)/float64(n), freedKiB, float64(freed)/float64(n), 100*float64(freed)/float64(keep))
	assert.Equal(t, []int{256, 256, 256, 0}, windows)
	assert.Equal(t, 48, n)
	assert.Equal(t, []int{56662, 14260, 6001}, []int{tokens, keep, freed}, "tokens, blocks kept, blocks freed over the workload")
}

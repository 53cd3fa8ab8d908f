package kvcache_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// TestOnEvictReportsTheFreedBlocks caches one prompt's blocks on each
// design, then grows a second sequence past what is free: the hook hears
// of exactly the cached blocks the allocator got back, before any is
// handed out again, and nothing when no eviction was needed.
func TestOnEvictReportsTheFreedBlocks(t *testing.T) {
	for _, d := range designs {
		build := d.new
		t.Run(d.name, func(t *testing.T) {
			const bs = 4
			p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 2, Blocks: 6, BlockSize: bs, NewCache: build})
			require.NoError(t, err)
			t.Cleanup(p.Close)
			var heard [][]int32
			p.OnEvict(func(b []int32) {
				for _, x := range b {
					assert.Zero(t, p.Allocator().Refs(x), "block %d is free when told", x)
				}
				heard = append(heard, slices.Clone(b))
			})
			prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
			_, err = p.Open(1, "", prompt)
			require.NoError(t, err)
			require.NoError(t, p.Grow(1, len(prompt)))
			cached := slices.Clone(p.Pages(1))
			p.Commit(1, prompt)
			p.Release(1)
			require.Empty(t, heard, "nothing evicted yet")

			_, err = p.Open(2, "", []int32{100})
			require.NoError(t, err)
			require.NoError(t, p.Grow(2, 2*bs), "two free blocks: no eviction")
			require.Empty(t, heard)
			require.NoError(t, p.Grow(2, 5*bs), "three more: the cache gives back three")
			require.Len(t, heard, 1)
			assert.Len(t, heard[0], 3)
			for _, b := range heard[0] {
				assert.Contains(t, cached, b, "an evicted block is one the prompt cached")
			}
			require.NoError(t, p.Audit().Err())
		})
	}
}

package kvcache_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// TestPoolWindowFree walks the local layers' half of the pool through a
// sequence's life: both tables grow together (all or nothing), Slide gives
// back exactly the local blocks before the window of the next query, a
// fork shares the local blocks and a write copies them, and the audit
// counts both kinds of blocks, catching a local block freed behind the
// pool's back.
func TestPoolWindowFree(t *testing.T) {
	// Layers 0 and 2 are local (window 4), layer 1 global; blocks of 2.
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 3, KVDim: 1, Blocks: 16, BlockSize: 2, Windows: []int{4, 0, 4}, LocalBlocks: 8})
	require.NoError(t, err)
	defer p.Close()
	require.True(t, p.WindowFree())
	assert.Equal(t, []bool{true, false, true}, []bool{p.LocalLayer(0), p.LocalLayer(1), p.LocalLayer(2)})
	k0, _ := p.Layer(0)
	k1, _ := p.Layer(1)
	assert.Equal(t, []int{16, 32}, []int{k0.Rows(), k1.Rows()}, "local storage of 8 blocks, global of 16")
	audit := func() { t.Helper(); require.NoError(t, p.Audit().Err()) }

	_, err = p.Open(1, "", nil)
	require.NoError(t, err)
	require.NoError(t, p.Grow(1, 10))
	assert.Equal(t, []int{5, 5}, []int{p.UsedBlocks(), p.UsedLocalBlocks()})
	p.Slide(1, 7) // a query at 7 sees 4…7: blocks 0 and 1 (positions 0…3) go
	assert.Equal(t, int32(-1), p.LocalPages(1)[0])
	assert.Equal(t, int32(-1), p.LocalPages(1)[1])
	assert.Len(t, p.LocalPages(1), len(p.Pages(1)))
	g, l := p.SeqBlocks(1)
	assert.Equal(t, []int{5, 3}, []int{g, l})
	assert.Equal(t, 3, p.UsedLocalBlocks())
	assert.Equal(t, 2*min(16-5, 8-3), p.FreeTokens(), "the fewer of the free global and local blocks")
	audit()

	// Sequence 2 needs 7 local blocks, 5 are free: it takes nothing.
	_, err = p.Open(2, "", nil)
	require.NoError(t, err)
	var oob *kvcache.OutOfBlocksError
	require.ErrorAs(t, p.Grow(2, 14), &oob)
	assert.Empty(t, p.Pages(2))
	assert.Equal(t, []int{5, 3}, []int{p.UsedBlocks(), p.UsedLocalBlocks()})
	audit()

	// A fork shares both tables; writing position 8 copies block 4 in both.
	require.NoError(t, p.Fork(1, 3))
	require.NoError(t, p.PrepareWrite(3, 8, 1))
	assert.Equal(t, 2, p.Copies())
	assert.NotEqual(t, p.LocalPages(1)[4], p.LocalPages(3)[4])
	assert.NotEqual(t, p.Pages(1)[4], p.Pages(3)[4])
	assert.Equal(t, 4, p.UsedLocalBlocks())
	audit()

	// A local block freed behind the pool's back is caught, as a local one.
	b := p.LocalPages(3)[2]
	p.LocalAllocator().Decref(b)
	rep := p.Audit()
	require.NotNil(t, rep.Local)
	assert.Equal(t, []int32{b}, rep.Local.Overfreed)
	assert.ErrorContains(t, rep.Err(), "local layers")
	p.LocalAllocator().Incref(b) // undo: b is still held by sequences 1 and 3
	audit()

	for _, id := range []int{1, 2, 3} {
		p.Release(id)
	}
	assert.Equal(t, []int{0, 0}, []int{p.UsedBlocks(), p.UsedLocalBlocks()})
	audit()
}

// TestPoolWindowFreeConfig refuses local storage without a window to free,
// or too small for one sequence's window.
func TestPoolWindowFreeConfig(t *testing.T) {
	for name, c := range map[string]kvcache.Config{
		"no local layer":    {Layers: 2, KVDim: 1, Blocks: 4, BlockSize: 2, Windows: []int{0, 0}, LocalBlocks: 4},
		"windows missing":   {Layers: 2, KVDim: 1, Blocks: 4, BlockSize: 2, LocalBlocks: 4},
		"negative":          {Layers: 1, KVDim: 1, Blocks: 4, BlockSize: 2, Windows: []int{4}, LocalBlocks: -1},
		"a negative window": {Layers: 2, KVDim: 1, Blocks: 4, BlockSize: 2, Windows: []int{4, -1}, LocalBlocks: 4},
		"below one window":  {Layers: 2, KVDim: 1, Blocks: 8, BlockSize: 2, Windows: []int{0, 5}, LocalBlocks: 3},
	} {
		_, err := kvcache.NewPool(cpu.New(), c)
		assert.Error(t, err, name)
	}
}

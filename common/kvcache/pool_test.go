package kvcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

func newTestPool(t *testing.T, blocks, blockSize int) *Pool {
	t.Helper()
	p, err := NewPool(cpu.New(), Config{Layers: 2, KVDim: 4, Blocks: blocks, BlockSize: blockSize})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func requireClean(t *testing.T, p *Pool) {
	t.Helper()
	require.NoError(t, p.Audit().Err())
}

func TestAllocatorAllocateAllOrNothing(t *testing.T) {
	a := NewAllocator(4)
	got, err := a.Allocate(nil, 3)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, got)

	_, err = a.Allocate(nil, 2)
	var oob *OutOfBlocksError
	require.ErrorAs(t, err, &oob)
	assert.Equal(t, 1, a.NumFree(), "a failed allocation must take nothing")

	assert.True(t, a.Decref(1))
	assert.Equal(t, 2, a.NumFree())
}

func TestAllocatorRefcounts(t *testing.T) {
	a := NewAllocator(2)
	b, _ := a.Allocate(nil, 1)
	a.Incref(b[0])
	assert.Equal(t, 2, a.Refs(b[0]))
	assert.False(t, a.Decref(b[0]), "one holder left")
	assert.True(t, a.Decref(b[0]), "last holder frees")
	assert.Panics(t, func() { a.Incref(b[0]) }, "sharing a free block must not resurrect it")
}

func TestPoolGrowSlotsRelease(t *testing.T) {
	p := newTestPool(t, 8, 4)
	_, err := p.Open(7, "", []int32{1, 2, 3, 4, 5})
	require.NoError(t, err)
	require.NoError(t, p.Grow(7, 5))
	assert.Equal(t, []int32{0, 1}, p.Pages(7))
	assert.Equal(t, 6*4, p.FreeTokens())

	// Position p lives at Pages[p/4]*4 + p%4.
	assert.Equal(t, []int32{2, 3, 4}, p.Slots(nil, 7, 2, 3))

	require.NoError(t, p.Grow(7, 8), "8 tokens still fit in 2 blocks")
	assert.Len(t, p.Pages(7), 2)
	require.NoError(t, p.Grow(7, 9))
	assert.Len(t, p.Pages(7), 3)
	requireClean(t, p)

	p.Release(7)
	assert.Equal(t, 8*4, p.FreeTokens())
	assert.Equal(t, 0, p.Live())
	requireClean(t, p)
	p.Release(7) // unknown ids are a no-op, so error paths can always release
	requireClean(t, p)
}

func TestPoolGrowIsAtomicWhenOutOfBlocks(t *testing.T) {
	p := newTestPool(t, 3, 2)
	_, _ = p.Open(1, "", nil)
	require.NoError(t, p.Grow(1, 4))
	_, _ = p.Open(2, "", nil)
	err := p.Grow(2, 4)
	var oob *OutOfBlocksError
	require.ErrorAs(t, err, &oob)
	assert.Empty(t, p.Pages(2), "have %v; want no pages after a failed grow", p.Pages(2))
	assert.Equal(t, 1, p.Allocator().NumFree())
	requireClean(t, p)
}

func TestPoolDuplicateOpen(t *testing.T) {
	p := newTestPool(t, 2, 2)
	_, err := p.Open(1, "", nil)
	require.NoError(t, err)
	_, err = p.Open(1, "", nil)
	require.ErrorContains(t, err, "already open")
}

func TestPoolForkCopyOnWrite(t *testing.T) {
	p := newTestPool(t, 4, 2)
	_, _ = p.Open(1, "", nil)
	require.NoError(t, p.Grow(1, 3)) // blocks 0, 1; block 1 half full
	k, v := p.Layer(0)
	kd, vd := cpu.Data(k), cpu.Data(v)
	for i := range kd {
		kd[i], vd[i] = float32(i), -float32(i)
	}
	require.NoError(t, p.Fork(1, 2))
	assert.Equal(t, p.Pages(1), p.Pages(2))
	requireClean(t, p)

	// The child writes position 3 (block 1): block 1 has two holders, so the
	// child gets a private copy; block 0 stays shared.
	require.NoError(t, p.PrepareWrite(2, 3, 1))
	assert.Equal(t, int32(0), p.Pages(2)[0])
	fresh := p.Pages(2)[1]
	assert.NotEqual(t, p.Pages(1)[1], fresh)
	assert.Equal(t, 1, p.Copies())
	assert.Equal(t, kd[1*2*4:2*2*4], kd[int(fresh)*2*4:(int(fresh)+1)*2*4], "the copy must carry the original's KV")
	requireClean(t, p)

	// The parent's block 1 now has one holder again: no copy.
	require.NoError(t, p.PrepareWrite(1, 3, 1))
	assert.Equal(t, 1, p.Copies())

	p.Release(1)
	p.Release(2)
	assert.Equal(t, 4, p.Allocator().NumFree())
	requireClean(t, p)
}

func TestAuditFindsLeaksAndDoubleFrees(t *testing.T) {
	p := newTestPool(t, 4, 2)
	_, _ = p.Open(1, "", nil)
	require.NoError(t, p.Grow(1, 4))
	pages := append([]int32(nil), p.Pages(1)...)

	// Forget the sequence without releasing: its blocks leak.
	delete(p.seqs, 1)
	r := p.Audit()
	assert.Equal(t, pages, r.Leaked)

	// Release them twice: the second release is a double free.
	for _, b := range pages {
		p.alloc.Decref(b)
	}
	p.alloc.Decref(pages[0])
	r = p.Audit()
	assert.Empty(t, r.Leaked)
	assert.Equal(t, []int32{pages[0]}, r.DoubleFreed)
	require.ErrorContains(t, r.Err(), "double-freed")
}

func TestAuditFindsOverfreedBlock(t *testing.T) {
	p := newTestPool(t, 4, 2)
	_, _ = p.Open(1, "", nil)
	require.NoError(t, p.Grow(1, 2))
	p.alloc.Decref(p.Pages(1)[0]) // freed while the page table still names it
	r := p.Audit()
	assert.Equal(t, []int32{0}, r.Overfreed)
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"layers", Config{KVDim: 1, Blocks: 1, BlockSize: 1}, "layers"},
		{"kv", Config{Layers: 1, Blocks: 1, BlockSize: 1}, "kv width"},
		{"blocks", Config{Layers: 1, KVDim: 1, BlockSize: 1}, "blocks"},
		{"block size", Config{Layers: 1, KVDim: 1, Blocks: 1}, "block size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, tc.c.Validate(), tc.want)
		})
	}
}

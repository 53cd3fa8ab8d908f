package radix_test

import (
	"fmt"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// Two requests share an 8-token system prompt. The pool asks the tree for
// the longest cached prefix when a sequence opens and offers it the
// sequence's blocks once its prompt is computed; the tree keeps the two
// whole blocks after the sequence ends, until it needs the room. The first
// request's third, partial block goes back to the pool, and the second
// request gets it again for its own suffix.
func Example() {
	pool, _ := kvcache.NewPool(cpu.New(), kvcache.Config{
		Layers: 1, KVDim: 1, Blocks: 8, BlockSize: 4, NewCache: radix.New,
	})
	defer pool.Close()
	tree := pool.Cache().(*radix.Tree)

	system := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	first := append(system[:8:8], 20, 21)
	cached, _ := pool.Open(1, "", first)
	pool.Grow(1, len(first)) // the engine now computes the KV of all 10 tokens
	pool.Commit(1, first)
	fmt.Println("first request: cached", cached, "pages", pool.Pages(1))
	pool.Release(1)
	fmt.Println("tree after it ends:", tree.Cached(), "blocks,", tree.Evictable(), "evictable")

	second := append(system[:8:8], 30, 31, 32)
	cached, _ = pool.Open(2, "", second)
	pool.Grow(2, len(second))
	fmt.Println("second request: cached", cached, "pages", pool.Pages(2))
	fmt.Println("evictable while it runs:", tree.Evictable())
	pool.Release(2)

	fmt.Println("evicted:", tree.Evict(8), "free blocks:", pool.Allocator().NumFree())
	// Output:
	// first request: cached 0 pages [0 1 2]
	// tree after it ends: 2 blocks, 2 evictable
	// second request: cached 8 pages [0 1 2]
	// evictable while it runs: 0
	// evicted: 2 free blocks: 8
}

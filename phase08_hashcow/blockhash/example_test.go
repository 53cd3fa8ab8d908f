package blockhash_test

import (
	"fmt"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
	"kvlab/phase08_hashcow/blockhash"
)

// Two requests share an 8-token system prompt, two blocks of 4. The second
// reuses both blocks by taking a reference on them: no KV is copied.
func Example() {
	pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{
		Layers: 1, KVDim: 1, Blocks: 8, BlockSize: 4,
		NewCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs) },
	})
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	first := []int32{1, 2, 3, 4, 5, 6, 7, 8, 100, 101}
	cached, _ := pool.Open(1, "", first)
	_ = pool.Grow(1, len(first)) // the forward would write the KV of first here
	pool.Commit(1, first)        // index its two full blocks
	fmt.Println("first request reused", cached, "tokens")

	second := []int32{1, 2, 3, 4, 5, 6, 7, 8, 200}
	cached, _ = pool.Open(2, "", second)
	_ = pool.Grow(2, len(second))
	fmt.Println("second request reused", cached, "tokens")
	fmt.Println("holders of the first block:", pool.Allocator().Refs(pool.Pages(2)[0]))

	pool.Release(1)
	pool.Release(2)
	fmt.Println("reclaimable once both finished:", pool.Cache().Evictable(), "blocks")
	// Output:
	// first request reused 0 tokens
	// second request reused 8 tokens
	// holders of the first block: 3
	// reclaimable once both finished: 2 blocks
}

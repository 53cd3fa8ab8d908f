package radix_test

import (
	"fmt"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
	"kvlab/phase08_prefix/radix"
)

// Two prompts that share their first block make a tree of three nodes:
// the shared block, and one child for each prompt's second block. The
// second request is still running, so its path has a user and only the
// first request's second block can be evicted.
func ExampleTree_Describe() {
	pool, _ := kvcache.NewPool(cpu.New(), kvcache.Config{
		Layers: 1, KVDim: 1, Blocks: 8, BlockSize: 2, NewCache: radix.New,
	})
	defer pool.Close()

	first := []int32{1, 2, 3, 4}
	pool.Open(1, "", first)
	pool.Grow(1, len(first))
	pool.Commit(1, first)
	pool.Release(1)

	second := []int32{1, 2, 7, 8}
	pool.Open(2, "", second)
	pool.Grow(2, len(second))
	pool.Commit(2, second)

	v, _ := kvcache.DescribeCache(pool.Cache(), 0)
	fmt.Println(v.Design, "policy", v.Policy, "block size", v.BlockSize)
	for _, n := range v.Nodes {
		fmt.Printf("node %d parent %d tokens %v blocks %v refs %v users %d rank %d\n",
			n.ID, n.Parent, n.Tokens, n.Blocks, n.Refs, n.Users, n.EvictRank)
	}
	// Output:
	// radix policy lru block size 2
	// node 0 parent -1 tokens [1 2] blocks [0] refs [1] users 1 rank -1
	// node 1 parent 0 tokens [3 4] blocks [1] refs [1] users 0 rank 0
	// node 2 parent 0 tokens [7 8] blocks [2] refs [1] users 1 rank -1
}

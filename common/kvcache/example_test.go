package kvcache_test

import (
	"fmt"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// A sequence's page table grows a block at a time, and each token position
// maps to a slot in the pool's K and V tensors through it.
func ExamplePool() {
	p, _ := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 8, Blocks: 4, BlockSize: 4})
	defer p.Close()

	_, _ = p.Open(1, "", nil)
	_ = p.Grow(1, 6) // 6 tokens need 2 blocks of 4
	fmt.Println("pages:", p.Pages(1))
	fmt.Println("slots of positions 3..5:", p.Slots(nil, 1, 3, 3))
	fmt.Println("free tokens:", p.FreeTokens())

	p.Release(1)
	fmt.Println("free tokens after release:", p.FreeTokens())
	fmt.Println("audit clean:", p.Audit().Clean())
	// Output:
	// pages: [0 1]
	// slots of positions 3..5: [3 4 5]
	// free tokens: 8
	// free tokens after release: 16
	// audit clean: true
}

// Forked sequences share blocks; the first write into a shared block copies
// it (copy-on-write), so the other holder's KV stays untouched.
func ExamplePool_PrepareWrite() {
	p, _ := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 8, Blocks: 4, BlockSize: 4})
	defer p.Close()

	_, _ = p.Open(1, "", nil)
	_ = p.Grow(1, 6)
	_ = p.Fork(1, 2)
	fmt.Println("after fork:", p.Pages(1), p.Pages(2))

	_ = p.PrepareWrite(2, 6, 1) // position 6 is in the shared second block
	fmt.Println("after write:", p.Pages(1), p.Pages(2), "copies:", p.Copies())
	// Output:
	// after fork: [0 1] [0 1]
	// after write: [0 1] [0 2] copies: 1
}

package trie_test

import (
	"fmt"
	"slices"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
	"kvlab/phase08_compressed/trie"
)

// Two requests share an 8-token system prompt (two blocks of 4). The
// second finds it cached, and the node holding the first request's prompt
// splits at the block boundary where the two part ways. Evicting one block
// takes it from the end of the least useful leaf; the system prompt, left
// with one child, merges with it into one node.
func Example() {
	var cache *trie.Trie
	pool, err := kvcache.NewPool(cpu.New(), kvcache.Config{
		Layers: 1, KVDim: 1, Blocks: 16, BlockSize: 4,
		NewCache: func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
			cache = trie.New(a, blockSize, trie.DeepestFirst)
			return cache
		},
	})
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	// serve does what the engine does for a request, minus the model:
	// match, grow the page table, (compute the rest), commit, release.
	serve := func(id int, prompt []int32) {
		cached, _ := pool.Open(id, "", prompt)
		if err := pool.Grow(id, len(prompt)); err != nil {
			panic(err)
		}
		fmt.Printf("request %d: %d of %d tokens cached, pages %v\n", id, cached, len(prompt), pool.Pages(id))
		pool.Commit(id, prompt)
		pool.Release(id)
	}
	system := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	serve(1, slices.Concat(system, []int32{10, 11, 12, 13}))
	serve(2, slices.Concat(system, []int32{20, 21, 22, 23, 24}))
	printShape(cache.Shape(), "")

	fmt.Println("evicted:", cache.Evict(1))
	printShape(cache.Shape(), "")
	// Output:
	// request 1: 0 of 12 tokens cached, pages [0 1 2]
	// request 2: 8 of 13 tokens cached, pages [0 1 3 4]
	// [1 2 3 4 5 6 7 8] blocks [0 1]
	//   [10 11 12 13] blocks [2]
	//   [20 21 22 23] blocks [3]
	// evicted: 1
	// [1 2 3 4 5 6 7 8 20 21 22 23] blocks [0 1 3]
}

// printShape prints a trie snapshot, one node per line, children indented.
func printShape(s trie.Shape, indent string) {
	for _, c := range s.Children {
		fmt.Printf("%s%v blocks %v\n", indent, c.Tokens, c.Blocks)
		printShape(c, indent+"  ")
	}
}

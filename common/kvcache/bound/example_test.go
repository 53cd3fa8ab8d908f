package bound_test

import (
	"fmt"

	"kvlab/common/kvcache/bound"
)

// Three questions share a system prompt of one block; between them, a
// one-off prompt of two blocks passes through a cache of two blocks. LRU
// keeps what was used last, the one-off prompt, and loses the system
// prompt every time; the bound keeps the system prompt, whose next use is
// nearest, and hits it twice. With no limit, the cache would hit it too.
func Example() {
	sys := []int32{1, 2, 3, 4} // one block of 4 tokens
	ask := func(q ...int32) []int32 { return append(sys[:4:4], q...) }
	reqs := []bound.Request{
		{Prompt: ask(10, 11, 12, 13)},
		{Prompt: []int32{50, 51, 52, 53, 54, 55, 56, 57}},
		{Prompt: ask(20, 21, 22, 23)},
		{Prompt: []int32{60, 61, 62, 63, 64, 65, 66, 67}},
		{Prompt: ask(30, 31, 32, 33)},
	}
	tr := bound.FromRequests(4, reqs)
	fmt.Print(tr.Report(2, tr.LRU(2))) // LRU is what was achieved here
	// Output:
	// cache blocks                   2
	// tokens per block               4
	// lookups                        5
	// prompt tokens                 40
	//               hit tokens   hit %
	// achieved               0     0.0
	// optimal                8    20.0
	// infinite               8    20.0
}

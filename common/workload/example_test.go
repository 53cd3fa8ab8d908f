package workload_test

import (
	"fmt"

	"kvlab/common/workload"
)

func ExampleGenerate() {
	p := workload.DefaultParams("prefix_caching")
	p.Requests = 4 // scaled down for a quick run
	reqs, err := workload.Generate("prefix_caching", p)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range reqs {
		fmt.Printf("request %d arrives at %v with %d prompt tokens, %d of them shared\n",
			r.ID, r.Arrival, len(r.Prompt), p.PrefixLen)
	}
	// Output:
	// request 0 arrives at 0s with 1152 prompt tokens, 1024 of them shared
	// request 1 arrives at 125ms with 1139 prompt tokens, 1024 of them shared
	// request 2 arrives at 250ms with 1083 prompt tokens, 1024 of them shared
	// request 3 arrives at 375ms with 1134 prompt tokens, 1024 of them shared
}

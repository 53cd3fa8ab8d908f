// Command phase08 is the lesson's experiment: the phase-7 baseline and the
// three prefix caches run in one process on the same requests and the same
// arrivals, with the same model. It checks that every cache generated
// exactly the baseline's tokens, prints one table, and plots TTFT per
// request for the four configurations.
//
//	go run ./phase08                              # prefix_caching at full size
//	go run ./phase08 -workload multi_turn
//	go run ./phase08 -workload no_shared_prefix   # what each cache costs when nothing is shared
//	go run ./phase08 align|pressure|order        # the three experiments (see experiments)
package main

import (
	"os"

	"kvlab/common/cli"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// Variants are the three designs, in the order the lesson presents them.
var Variants = []cli.Variant{
	{Name: "radix tree (prefix)", PrefixCache: radix.PrefixCache},
	{Name: "hash + CoW (hashcow)", PrefixCache: blockhash.PrefixCache},
	{Name: "compressed trie", PrefixCache: trie.PrefixCache},
}

func main() {
	if len(os.Args) > 1 {
		if run, ok := experiments[os.Args[1]]; ok {
			os.Exit(run(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(cli.Compare(Variants, os.Args[1:], os.Stdout, os.Stderr))
}

// Command phase08_compressed is the serving engine with a compressed radix
// trie as its prefix cache: nodes hold runs of whole KV blocks, a new prompt
// reuses the blocks of its longest cached block-aligned prefix, and a node
// is split at a block boundary where two prompts part ways. Requests finish
// by caching prompt and output, so the next turn of a conversation reuses
// both.
//
//	phase08_compressed bench --compare --workload prefix_caching
//	phase08_compressed bench --compare --workload multi_turn
//	phase08_compressed generate --prompt 1,2,3 --max-tokens 8
//	phase08_compressed init-model --arch qwen3 --out /tmp/qwen3
package main

import (
	"os"

	"kvlab/common/cli"
	"kvlab/phase08_compressed/trie"
)

func main() {
	os.Exit(cli.Main(cli.Variant{
		Name:        "phase08_compressed",
		Summary:     "prefix cache: compressed radix trie, block-aligned splits, prompt and output cached for the next turn",
		PrefixCache: trie.PrefixCache,
	}, os.Args[1:], os.Stdout, os.Stderr))
}

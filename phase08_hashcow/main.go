// Command phase08_hashcow is the serving engine with a hash-indexed prefix
// cache: each full KV block of a prompt is indexed under a hash chained over
// the blocks before it, a new request reuses the blocks of its longest
// cached prefix by taking a reference on them, and a block with more than
// one holder is copied before anyone writes into it (copy-on-write). The
// index lives in the blockhash package.
//
//	phase08_hashcow bench --compare
//	phase08_hashcow generate --prompt 1,2,3 --max-tokens 8
//	phase08_hashcow logits --prompt 1,2,3
//	phase08_hashcow init-model --arch qwen3 --out out/qwen3
package main

import (
	"os"

	"kvlab/common/cli"
	"kvlab/phase08_hashcow/blockhash"
)

func main() {
	os.Exit(cli.Main(cli.Variant{
		Name:        "phase08_hashcow",
		Summary:     "prefix reuse through a chained block-hash index, with copy-on-write",
		PrefixCache: blockhash.PrefixCache,
	}, os.Args[1:], os.Stdout, os.Stderr))
}

// newCache builds the prefix cache the engine plugs in.

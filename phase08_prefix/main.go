// Command phase08_prefix is the serving engine with a block-aligned radix
// tree of cached KV blocks: a request whose prompt starts with blocks
// another request already computed reuses their KV and prefills only the
// rest. Everything else is the phase-7 engine.
//
//	phase08_prefix bench --compare                 baseline and cache, same arrivals
//	phase08_prefix bench --admission conservative  charge whole prompts at admission
//	phase08_prefix generate --prompt 1,2,3 --max-tokens 8
package main

import (
	"os"

	"kvlab/common/cli"
	"kvlab/phase08_prefix/radix"
)

// variant is this runnable: the shared command line with the radix tree as
// the engine's prefix cache.
var variant = cli.Variant{
	Name:        "phase08_prefix",
	Summary:     "phase-7 engine plus a block-aligned radix tree that reuses the KV of shared prompt prefixes",
	PrefixCache: radix.New,
}

func main() {
	os.Exit(cli.Main(variant, os.Args[1:], os.Stdout, os.Stderr))
}

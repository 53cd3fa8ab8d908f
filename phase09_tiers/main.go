// Command phase09_tiers is the lesson's experiment on cache tiers
// (docs/phase09_tiers.md): a multi-turn workload whose conversations
// outgrow the KV pool, served by one prefix cache in a pool that never
// evicts (the reference), then in a small pool with no tier, with a
// host-memory tier, with a small host-memory tier over a disk tier, and
// with a disk tier alone. It checks that every configuration generated
// the reference's tokens and prints one table.
//
//	go run ./phase09_tiers -clock step:50ms                 # the radix tree
//	go run ./phase09_tiers -clock step:50ms -design all     # the three designs
//	go run ./phase09_tiers -clock step:50ms -llama-cpp DIR  # and llama-server's --cache-ram
package main

import (
	"os"

	"kvlab/common/cli"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// Designs are the three prefix caches, in the order the lesson presents
// them, each with the word -design picks it by.
var Designs = []cli.TiersDesign{
	{Flag: "radix", Variant: cli.Variant{Name: "radix tree (prefix)", PrefixCache: radix.PrefixCache}},
	{Flag: "hashcow", Variant: cli.Variant{Name: "hash + CoW (hashcow)", PrefixCache: blockhash.PrefixCache}},
	{Flag: "trie", Variant: cli.Variant{Name: "compressed trie", PrefixCache: trie.PrefixCache}},
}

func main() {
	os.Exit(cli.Tiers(Designs, os.Args[1:], os.Stdout, os.Stderr))
}

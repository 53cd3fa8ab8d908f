package main

import (
	"io"

	"kvlab/common/cli"
	"kvlab/phase08_compressed/trie"
)

// experiments are the lesson's three experiments, each a subcommand that
// isolates one effect (docs/phase08_experiments.md):
//
//	go run ./phase08 align -clock step:50ms      # block size: block-aligned against token-level reuse
//	go run ./phase08 pressure -clock step:50ms   # eviction policy: hit rate and evictions under memory pressure
//	go run ./phase08 order -clock step:50ms      # admission order: FCFS against longest prefix first
var experiments = map[string]func(args []string, stdout, stderr io.Writer) int{
	"align": func(args []string, stdout, stderr io.Writer) int {
		return cli.Alignment(Variants, args, stdout, stderr)
	},
	"pressure": func(args []string, stdout, stderr io.Writer) int {
		return cli.Pressure(PolicyVariants, args, stdout, stderr)
	},
	"order": func(args []string, stdout, stderr io.Writer) int {
		return cli.Order(Variants[0], args, stdout, stderr)
	},
}

// PolicyVariants are the designs with every eviction policy they have:
// the radix tree's and the hash index's one (least recently used), and
// each trie.Policy of the compressed trie.
var PolicyVariants = []cli.Variant{
	{Name: "radix tree, LRU leaves", PrefixCache: Variants[0].PrefixCache},
	{Name: "hash index, LRU blocks", PrefixCache: Variants[1].PrefixCache},
	{Name: "trie, deepest first", PrefixCache: trie.WithPolicy(trie.DeepestFirst)},
	{Name: "trie, LRU", PrefixCache: trie.WithPolicy(trie.LRU)},
	{Name: "trie, priority", PrefixCache: trie.WithPolicy(trie.Priority)},
	{Name: "trie, size-aware", PrefixCache: trie.WithPolicy(trie.SizeAware)},
}

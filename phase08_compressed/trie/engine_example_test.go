package trie_test

import (
	"fmt"

	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
)

// An engine with the trie as its prefix cache: a program sets
// engine.Config.PrefixCache to trie.PrefixCache, and that is all
// (cachetest.SharedPrefixDemo builds the engine and serves two requests
// that share a 16-token system prompt, four blocks of 4). The second
// request finds all of it cached.
func Example_engine() {
	first, second, err := cachetest.SharedPrefixDemo(trie.PrefixCache)
	if err != nil {
		panic(err)
	}
	fmt.Println("first request found:", first, "tokens")
	fmt.Println("second request found:", second, "tokens")
	// Output:
	// first request found: 0 tokens
	// second request found: 16 tokens
}

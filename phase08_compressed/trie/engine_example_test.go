package trie_test

import (
	"fmt"
	"os"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels/cpu"
	"kvlab/phase08_compressed/trie"
)

// An engine with the trie as its prefix cache, built the way a program
// outside this repository would: trie.PrefixCache goes into
// engine.Config.PrefixCache. The second request shares a 16-token system
// prompt (four blocks of 4) with the first and finds all of it cached.
func Example_engine() {
	dir, err := os.MkdirTemp("", "kvlab-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 1)); err != nil {
		panic(err)
	}
	m, err := model.Load(dir, cpu.New())
	if err != nil {
		panic(err)
	}
	defer m.Close()

	cfg := engine.DefaultConfig()
	cfg.BlockSize = 4
	cfg.PrefixCache = trie.PrefixCache
	e, err := engine.New(m, cfg)
	if err != nil {
		panic(err)
	}
	defer e.Close()

	system := []int32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}
	ask := func(id int, question ...int32) {
		prompt := append(append([]int32{}, system...), question...)
		res := e.RunAll([]engine.Request{{ID: id, Prompt: prompt, MaxTokens: 3}})[id]
		if res.Err != nil {
			panic(res.Err)
		}
	}
	ask(1, 40, 41)
	before := e.Stats().CachedTokens
	ask(2, 50, 51, 52)
	fmt.Println("first request found:", before, "tokens")
	fmt.Println("second request found:", e.Stats().CachedTokens-before, "tokens")
	// Output:
	// first request found: 0 tokens
	// second request found: 16 tokens
}

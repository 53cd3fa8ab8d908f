package cachetest

import (
	"os"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels/cpu"
)

// SharedPrefixDemo builds an engine the way a program outside this
// repository would — a small synthetic model, engine.DefaultConfig with
// blocks of 4 tokens, and f as engine.Config.PrefixCache — then serves two
// requests, one after the other, that share a 16-token system prompt. It
// returns the prompt tokens each found in the cache. Each design's
// Example_engine calls it, so the examples show only what differs: the
// constructor.
func SharedPrefixDemo(f Factory) (first, second int, err error) {
	dir, err := os.MkdirTemp("", "kvlab-example-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	if err := model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 1)); err != nil {
		return 0, 0, err
	}
	m, err := model.Load(dir, cpu.New())
	if err != nil {
		return 0, 0, err
	}
	defer m.Close()

	cfg := engine.DefaultConfig()
	cfg.BlockSize = 4
	cfg.PrefixCache = f
	e, err := engine.New(m, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer e.Close()

	system := []int32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26}
	found := func(id int, question ...int32) (int, error) {
		before := e.Stats().CachedTokens
		prompt := append(append([]int32{}, system...), question...)
		if res := e.RunAll([]engine.Request{{ID: id, Prompt: prompt, MaxTokens: 3}})[id]; res.Err != nil {
			return 0, res.Err
		}
		return e.Stats().CachedTokens - before, nil
	}
	if first, err = found(1, 40, 41); err != nil {
		return 0, 0, err
	}
	second, err = found(2, 50, 51, 52)
	return first, second, err
}

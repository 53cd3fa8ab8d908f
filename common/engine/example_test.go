package engine_test

import (
	"fmt"
	"os"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels/cpu"
)

// Serving two requests at once: the engine batches their prefill and
// decode steps, and each request's tokens are what it would get alone.
func ExampleEngine_RunAll() {
	dir, _ := os.MkdirTemp("", "engine-example-")
	defer os.RemoveAll(dir)
	_ = model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 7))
	m, _ := model.Load(dir, cpu.New())
	defer m.Close()

	e, _ := engine.New(m, engine.DefaultConfig())
	defer e.Close()
	res := e.RunAll([]engine.Request{
		{ID: 1, Prompt: []int32{1, 2, 3}, MaxTokens: 4, IgnoreEOS: true},
		{ID: 2, Prompt: []int32{9, 8, 7, 6, 5}, MaxTokens: 2, IgnoreEOS: true},
	})
	fmt.Println(len(res[1].Tokens), res[1].Reason)
	fmt.Println(len(res[2].Tokens), res[2].Reason)
	fmt.Println("steps:", e.Stats().Steps, "KV blocks in use after:", e.Pool().UsedBlocks())
	// Output:
	// 4 length
	// 2 length
	// steps: 4 KV blocks in use after: 0
}

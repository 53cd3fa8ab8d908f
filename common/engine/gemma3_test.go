package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"kvlab/common/model/modeltest"
)

// TestGemma3BitExactPastTheWindow runs the engine's bit-exactness checks on
// a Gemma-3 whose sliding layers see only modeltest.GemmaWindow positions,
// with prompts and generations well past the window: chunked prefill (chunks
// smaller than, equal to and larger than the window) must equal the
// whole-prompt prefill, and continuous batching must equal one request at a
// time. A window applied relative to the chunk instead of the position, or
// lost in a decode, breaks these.
func TestGemma3BitExactPastTheWindow(t *testing.T) {
	m := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	rng := rand.New(rand.NewPCG(5, 6))
	var reqs []Request
	for i, n := range []int{1, 5, modeltest.GemmaWindow, modeltest.GemmaWindow + 1, 37, 70} {
		reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, n, m.Config.VocabSize), MaxTokens: 12, IgnoreEOS: true, KeepLogits: true})
	}
	whole := testConfig()
	whole.ChunkedPrefill = false
	whole.MaxBatchTokens = 512
	whole.MaxContext = 512
	want := solo(t, m, whole, reqs)

	for _, chunk := range []int{1, 3, modeltest.GemmaWindow, 16} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			c := testConfig()
			c.MaxBatchTokens = chunk
			c.MaxRunning = 1
			requireSameResults(t, solo(t, m, c, reqs), want)
		})
	}
	for _, budget := range []int{8, 32, 128} {
		t.Run(fmt.Sprintf("batched/budget=%d", budget), func(t *testing.T) {
			c := testConfig()
			c.MaxBatchTokens = budget
			c.MaxRunning = min(budget, 8)
			requireSameResults(t, newTestEngine(t, m, c).RunAll(reqs), want)
		})
	}
}

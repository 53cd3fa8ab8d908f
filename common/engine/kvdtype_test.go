package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestKVDType16KeepsTheInvariances runs the engine's bit-exactness checks
// with the KV pool in bfloat16 and in float16: within one dtype, chunked
// prefill equals the whole-prompt prefill (which attends over the step's
// own keys and values, rounded by WriteKV as the cache holds them),
// continuous batching and preemption equal one request at a time, forked
// samples (copy-on-write through CopyBlock) equal single-sample runs, and
// Gemma-3's local layers give back out-of-window blocks without a bit of
// difference. It also checks the pool holds the dtype, and that the
// logits differ from the float32 pool's: the dtype is really applied.
func TestKVDType16KeepsTheInvariances(t *testing.T) {
	llama, qwen := loadTestModel(t, model.ArchLlama), loadTestModel(t, model.ArchQwen3)
	gemma := modeltest.LoadOptions(t, modeltest.Gemma3Options(7))
	for _, dt := range []kernels.KVDType{kernels.KVBF16, kernels.KVF16} {
		cfg := func(edit func(*Config)) Config {
			c := testConfig()
			c.KVCacheDType = dt
			if edit != nil {
				edit(&c)
			}
			return c
		}
		t.Run(dt.String(), func(t *testing.T) {
			for _, m := range []*model.Model{llama, qwen, gemma} {
				rng := rand.New(rand.NewPCG(11, uint64(dt)))
				var reqs []Request
				for i, n := range []int{1, 5, 37, 70} {
					reqs = append(reqs, Request{ID: i, Prompt: randomPrompt(rng, n, m.Config.VocabSize), MaxTokens: 8, IgnoreEOS: true, KeepLogits: true})
				}
				arch := m.Config.Arch
				want := solo(t, m, cfg(func(c *Config) { c.ChunkedPrefill, c.MaxBatchTokens, c.MaxContext = false, 512, 512 }), reqs)

				t.Run(arch+"/pool dtype", func(t *testing.T) {
					e := newTestEngine(t, m, cfg(nil))
					require.Equal(t, dt, e.Pool().DType())
					k, _ := e.Pool().Layer(0)
					require.Equal(t, dt, cpu.KVDTypeOf(k))
					f32 := solo(t, m, testConfig(), reqs[3:])[3]
					require.NotEqual(t, f32.Logits[0], want[3].Logits[0], "the %v pool's logits equal the float32 pool's", dt)
				})
				for _, chunk := range []int{1, 3, 16} {
					t.Run(fmt.Sprintf("%s/chunk=%d", arch, chunk), func(t *testing.T) {
						requireSameResults(t, solo(t, m, cfg(func(c *Config) { c.MaxBatchTokens, c.MaxRunning = chunk, 1 }), reqs), want)
					})
				}
				t.Run(arch+"/batched", func(t *testing.T) {
					requireSameResults(t, newTestEngine(t, m, cfg(func(c *Config) { c.MaxBatchTokens, c.MaxRunning = 32, 8 })).RunAll(reqs), want)
				})
				t.Run(arch+"/preempting", func(t *testing.T) {
					var short []Request // as TestPoolExhaustionQueuesAndPreempts
					for i := range 8 {
						short = append(short, Request{ID: i, Prompt: randomPrompt(rng, 10+rng.IntN(10), m.Config.VocabSize), MaxTokens: 12, IgnoreEOS: true, KeepLogits: true})
					}
					want := solo(t, m, cfg(nil), short)
					e := newTestEngine(t, m, cfg(func(c *Config) { c.NumBlocks = 14 }))
					requireSameResults(t, e.RunAll(short), want)
					require.Positive(t, e.Stats().Preemptions, "the case must preempt")
				})
				if m == gemma {
					t.Run(arch+"/window-free", func(t *testing.T) {
						requireSameResults(t, newTestEngine(t, m, cfg(func(c *Config) { c.WindowFree = true })).RunAll(reqs), want)
					})
				}
			}

			t.Run("forks", func(t *testing.T) {
				prompt := []int32{1, 4, 7, 10, 13, 16, 19, 22, 25, 28}
				s := Sampling{Temperature: 1.5, Seed: 100}
				e := newTestEngine(t, qwen, cfg(nil))
				res := e.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: s, N: 4}})[1]
				require.NoError(t, res.Err)
				require.Positive(t, e.Pool().Copies(), "the samples must share a block and copy it")
				for i, got := range res.Samples {
					alone := s
					alone.Seed += uint64(i)
					want := solo(t, qwen, cfg(nil), []Request{{ID: 1, Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Sampling: alone}})[1]
					require.Equal(t, want.Tokens, got, "sample %d", i)
				}
			})
		})
	}
}

// TestPoolBytesCountsTheDType: a 16-bit pool takes half the bytes.
func TestPoolBytesCountsTheDType(t *testing.T) {
	c := DefaultConfig()
	c.NumBlocks, c.BlockSize = 4096, 16
	// Qwen3-0.6B: 28 layers, 8 KV heads of 128.
	require.Equal(t, int64(2*28*4096*16*1024*4), c.PoolBytes(28, 1024))
	for _, dt := range []kernels.KVDType{kernels.KVBF16, kernels.KVF16} {
		c.KVCacheDType = dt
		require.Equal(t, int64(2*28*4096*16*1024*2), c.PoolBytes(28, 1024))
	}
	c.KVCacheDType = 9
	require.ErrorContains(t, c.Validate(1024), "KV cache dtype KVDType(9) is unknown")
}

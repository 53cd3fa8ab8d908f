package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
)

// designNames lists missDesigns in a fixed order.
func designNames() []string {
	var names []string
	for n := range missDesigns {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// cachedPages returns the pool blocks the prefix cache holds for prompt's
// leading whole blocks (taking and giving back a match between steps).
func cachedPages(t *testing.T, e *Engine, salt string, prompt []int32) []int32 {
	t.Helper()
	const probe = 1 << 30
	cached, err := e.Pool().Open(probe, salt, prompt)
	require.NoError(t, err)
	pages := append([]int32(nil), e.Pool().Pages(probe)[:cached/e.Pool().BlockSize()]...)
	e.Pool().Release(probe)
	return pages
}

// TestVerifyHitsCatchesACorruptBlock caches a prompt, flips bits in one
// layer of one of its cached blocks, and sends a request sharing the
// prefix with every hit verified: the verifier reports that block, the
// cache forgets it, and the next request with the prefix stops before it
// and gives exactly what an engine without a cache gives.
func TestVerifyHitsCatchesACorruptBlock(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	rng := rand.New(rand.NewPCG(3, 9))
	prompt := randomPrompt(rng, 24, m.Config.VocabSize) // 6 blocks of 4
	next := append(append([]int32(nil), prompt[:20]...), randomPrompt(rng, 5, m.Config.VocabSize)...)
	last := append(append([]int32(nil), prompt[:22]...), randomPrompt(rng, 3, m.Config.VocabSize)...)
	const bad, layer = 2, 1
	want := solo(t, m, testConfig(), []Request{{ID: 3, Prompt: last, MaxTokens: 4, IgnoreEOS: true, KeepLogits: true}})[3]
	for _, name := range designNames() {
		for _, salt := range []string{"", "tenant"} {
			t.Run(fmt.Sprintf("%s/salted=%v", name, salt != ""), func(t *testing.T) {
				var log bytes.Buffer
				c := testConfig()
				c.PrefixCache, c.VerifyHits, c.VerifyLog = missDesigns[name], 1, &log
				e := newTestEngine(t, m, c)
				res := e.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 2, IgnoreEOS: true, CacheSalt: salt}})[1]
				require.NoError(t, res.Err)
				require.Zero(t, e.Stats().VerifyChecked, "a cold prompt is no hit")

				pages := cachedPages(t, e, salt, prompt)
				require.Len(t, pages, 6)
				p := e.Pool()
				n := p.BlockSize() * p.KVDim()
				k, v := make([]float32, n), make([]float32, n)
				p.ReadBlock(layer, pages[bad], k, v)
				k[5] = -k[5] - 1 // a flipped sign and more
				require.NoError(t, p.WriteBlock(layer, pages[bad], k, v))

				res = e.RunAll([]Request{{ID: 2, Prompt: next, MaxTokens: 2, IgnoreEOS: true, CacheSalt: salt}})[2]
				require.NoError(t, res.Err)
				require.Equal(t, 20, res.Cached)
				st := e.Stats()
				require.Equal(t, 1, st.VerifyChecked)
				require.Equal(t, 1, st.VerifyFailed, log.String())
				require.Contains(t, log.String(), fmt.Sprintf("request 2 (%s): cached block %d (pool block %d) layer %d differs", map[bool]string{false: "unsalted", true: "salted"}[salt != ""], bad, pages[bad], layer))
				require.NotContains(t, log.String(), salt+"\"")

				res = e.RunAll([]Request{{ID: 3, Prompt: last, MaxTokens: 4, IgnoreEOS: true, KeepLogits: true, CacheSalt: salt}})[3]
				require.NoError(t, res.Err)
				// The hit stops before the forgotten block, unless request 2
				// was still running when the result came: then it was
				// preempted and computed the block again, clean.
				stop := bad * p.BlockSize()
				if bytes.Contains(log.Bytes(), []byte("preempted 1 sequences")) {
					stop = 20
				}
				require.Equal(t, stop, res.Cached, "the hit must stop before the forgotten block")
				require.Equal(t, want.Tokens, res.Tokens)
				requireBitsEqual(t, want.Logits, res.Logits)
				require.Equal(t, 1, e.Stats().VerifyFailed, "the recomputed blocks verify clean")
				require.NoError(t, p.Audit().Err())
			})
		}
	}
}

// requireBitsEqual compares logits bit for bit.
func requireBitsEqual(t *testing.T, want, got [][]float32) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Equal(t, len(want[i]), len(got[i]))
		for j := range want[i] {
			if want[i][j] != got[i][j] && !(want[i][j] != want[i][j] && got[i][j] != got[i][j]) {
				t.Fatalf("logits of token %d differ at %d: %v vs %v", i, j, want[i][j], got[i][j])
			}
		}
	}
}

// TestVerifyHitsFindsCleanBlocksClean verifies every hit of a shared-prefix
// workload on each design, each KV dtype and a model with sliding-window
// layers, with chunks that cut blocks and prompts anywhere: the recompute
// must agree with the cache bit for bit every time.
func TestVerifyHitsFindsCleanBlocksClean(t *testing.T) {
	models := []*model.Model{loadTestModel(t, model.ArchLlama), modeltest.LoadOptions(t, modeltest.Gemma3Options(7))}
	for _, m := range models {
		for _, dt := range []kernels.KVDType{kernels.KVF32, kernels.KVBF16, kernels.KVF16} {
			for _, name := range designNames() {
				for _, chunk := range []int{7, 64} {
					t.Run(fmt.Sprintf("%s/%v/%s/chunk=%d", m.Config.Arch, dt, name, chunk), func(t *testing.T) {
						var log bytes.Buffer
						c := testConfig()
						c.PrefixCache, c.VerifyHits, c.VerifyLog = missDesigns[name], 1, &log
						c.KVCacheDType, c.MaxBatchTokens = dt, chunk
						e := newTestEngine(t, m, c)
						rng := rand.New(rand.NewPCG(5, uint64(dt)))
						system := randomPrompt(rng, 18, m.Config.VocabSize)
						for i := range 6 {
							reqs := []Request{}
							for j := range 2 {
								p := append(append([]int32(nil), system[:10+4*j]...), randomPrompt(rng, 3+i, m.Config.VocabSize)...)
								reqs = append(reqs, Request{ID: 2*i + j, Prompt: p, MaxTokens: 3, IgnoreEOS: true})
							}
							for _, r := range e.RunAll(reqs) {
								require.NoError(t, r.Err)
							}
						}
						st := e.Stats()
						require.Zero(t, st.VerifyFailed, log.String())
						require.Positive(t, st.VerifyChecked)
						require.Equal(t, st.VerifyChecked+st.VerifySkipped, e.verifyHitsSeen())
					})
				}
			}
		}
	}
}

// TestCloseWaitsForTheVerifier: Close returns only once the verifier
// goroutine has ended, so a caller may close the model right after it
// (serve does) without a recompute still reading the weights.
func TestCloseWaitsForTheVerifier(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.PrefixCache, c.VerifyHits = missDesigns["radix"], 1
	e, err := New(m, c)
	require.NoError(t, err)
	prompt := randomPrompt(rand.New(rand.NewPCG(1, 2)), 40, m.Config.VocabSize)
	e.RunAll([]Request{{ID: 1, Prompt: prompt, MaxTokens: 1}})
	require.NoError(t, e.Submit(Request{ID: 2, Prompt: prompt, MaxTokens: 1}))
	e.Step() // admits request 2: its hit goes to the verifier
	v := e.verify
	require.Equal(t, 1, v.busy)
	e.Close()
	select {
	case <-v.done:
	default:
		t.Fatal("Close returned while the verifier goroutine was still running")
	}
}

// TestVerifyHitsSkipsWhenTheVerifierIsBusy: hits admitted together beyond
// the verifier's queue are skipped and counted, never waited for; every
// hit is either checked or skipped. VerifyHits without a prefix cache, or
// below 0, is refused naming the field.
func TestVerifyHitsSkipsWhenTheVerifierIsBusy(t *testing.T) {
	m := loadTestModel(t, model.ArchLlama)
	c := testConfig()
	c.PrefixCache, c.VerifyHits = missDesigns["trie"], 1
	e := newTestEngine(t, m, c)
	rng := rand.New(rand.NewPCG(8, 8))
	system := randomPrompt(rng, 32, m.Config.VocabSize)
	e.RunAll([]Request{{ID: 0, Prompt: system, MaxTokens: 1}})
	var reqs []Request
	for i := 1; i <= 10; i++ {
		reqs = append(reqs, Request{ID: i, Prompt: append(append([]int32(nil), system...), randomPrompt(rng, 3, m.Config.VocabSize)...), MaxTokens: 2, IgnoreEOS: true})
	}
	for _, r := range e.RunAll(reqs) {
		require.NoError(t, r.Err)
	}
	st := e.Stats()
	require.Positive(t, st.VerifySkipped, "%+v", st)
	require.Zero(t, st.VerifyFailed)
	require.Equal(t, 10, st.VerifyChecked+st.VerifySkipped)

	for _, bad := range []Config{func() Config { c := testConfig(); c.VerifyHits = 1; return c }(), func() Config { c := testConfig(); c.VerifyHits = -1; return c }()} {
		_, err := New(m, bad)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "VerifyHits", ce.Field)
		require.Contains(t, err.Error(), "hit verification")
	}
}

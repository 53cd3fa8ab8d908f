package main

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/phase08_hashcow/blockhash"
)

// solo returns what each of a request's samples would generate alone: the
// same prompt with seed Seed+i on the phase-7 engine without a cache, and
// the logits of each token.
func solo(t *testing.T, r engine.Request, samples int) (tokens [][]int32, logits [][][]float32) {
	t.Helper()
	m := loadModel(t)
	for i := range samples {
		alone := r
		alone.N, alone.KeepLogits = 1, true
		alone.Sampling.Seed += uint64(i)
		res := baseline(t, m, testConfig(), []engine.Request{alone})[r.ID]
		tokens = append(tokens, res.Tokens)
		logits = append(logits, res.Logits)
	}
	return tokens, logits
}

// TestForkedSamplesMatchSoloRuns: n samples of one prompt share every
// prompt block, the half-full last one included, and each is still exactly
// the request it would have been alone. The first write of each sample but
// the last into the shared partial block copies it; a block-aligned prompt
// starts every sample on a fresh block and copies nothing.
func TestForkedSamplesMatchSoloRuns(t *testing.T) {
	m := loadModel(t)
	for _, tc := range []struct {
		prompt, n int
	}{
		{10, 4}, {10, 2}, {8, 4}, {13, 3}, {1, 4},
	} {
		t.Run(fmt.Sprintf("prompt=%d/n=%d", tc.prompt, tc.n), func(t *testing.T) {
			bs := testConfig().BlockSize
			r := engine.Request{ID: 1, Prompt: tokens(40, tc.prompt), MaxTokens: 7, IgnoreEOS: true, N: tc.n,
				Sampling: engine.Sampling{Temperature: 1.3, Seed: 50}}
			want, wantLogits := solo(t, r, tc.n)
			wantCopies := 0
			if tc.prompt%bs != 0 {
				wantCopies = tc.n - 1
			}

			t.Run("engine", func(t *testing.T) {
				res, e := serve(t, m, cached(testConfig(), blockhash.PrefixCache), []engine.Request{r}, 0)
				require.Equal(t, want, res[1].Samples)
				if have := e.Pool().Copies(); have != wantCopies {
					t.Fatalf("copies: have %d; want %d", have, wantCopies)
				}
			})
			t.Run("driver", func(t *testing.T) {
				d := newForkDriver(t, m, 64, bs, blockhash.PrefixCache)
				have, logits, err := d.run(r.Prompt, tc.n, r.MaxTokens, r.Sampling)
				require.NoError(t, err)
				require.Equal(t, want, have)
				if d := cmp.Diff(wantLogits, logits); d != "" {
					t.Fatalf("logits differ from the solo runs (-want +have):\n%s", d)
				}
				if have := d.pool.Copies(); have != wantCopies {
					t.Fatalf("copies: have %d; want %d", have, wantCopies)
				}
				t.Logf("%d samples of a %d-token prompt: %d copies, every sample equal to its solo run", tc.n, tc.prompt, d.pool.Copies())
			})
		})
	}
}

// TestForksSaveMemory measures the blocks four samples of one prompt hold
// at their peak against four separate requests arriving together (the
// cache cannot help those: none has committed its prompt when the others
// are admitted). Run with -v to see the numbers.
func TestForksSaveMemory(t *testing.T) {
	m := loadModel(t)
	const prompt, out, n = 50, 32, 4
	c := testConfig()
	c.BlockSize, c.NumBlocks, c.MaxBatchTokens = 16, 64, 256
	s := engine.Sampling{Temperature: 1, Seed: 9}
	one := engine.Request{ID: 0, Prompt: tokens(7, prompt), MaxTokens: out, IgnoreEOS: true, Sampling: s}
	var separate []engine.Request
	for i := range n {
		r := one
		r.ID = i
		r.Sampling.Seed += uint64(i)
		separate = append(separate, r)
	}
	forked := one
	forked.N = n

	_, fe := serve(t, m, cached(c, blockhash.PrefixCache), []engine.Request{forked}, 0)
	_, be := serve(t, m, c, separate, 0)

	// Forked: the 3 whole prompt blocks once; each sample its own copy of
	// the 4th (2 prompt tokens) and the blocks for the rest of its output:
	// positions 50..80 end in block 5, so 3 blocks each.
	full := prompt / c.BlockSize
	perSample := (prompt+out-1+c.BlockSize-1)/c.BlockSize - full
	if have, want := fe.Stats().PeakBlocks, full+n*perSample; have != want {
		t.Fatalf("peak blocks with %d forked samples: have %d; want %d", n, have, want)
	}
	if have, want := be.Stats().PeakBlocks, n*(full+perSample); have != want {
		t.Fatalf("peak blocks of %d separate requests: have %d; want %d", n, have, want)
	}
	t.Logf("peak KV blocks: %d forked samples %d; %d separate requests %d",
		n, fe.Stats().PeakBlocks, n, be.Stats().PeakBlocks)
	t.Logf("prompt tokens computed: forked %d; separate %d", fe.Stats().PrefillTokens, be.Stats().PrefillTokens)
	t.Logf("copy-on-write copies: forked %d", fe.Pool().Copies())
}

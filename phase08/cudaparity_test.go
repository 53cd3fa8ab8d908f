//go:build cuda || cudaemu

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
	"kvlab/kernels/cuda"
)

// needCUDA returns the CUDA backend, or skips the test without a device,
// unless KVLAB_REQUIRE_GPU=1 makes that a failure.
func needCUDA(t *testing.T) kernels.Backend {
	t.Helper()
	gpu, err := cuda.New()
	if err != nil {
		if os.Getenv("KVLAB_REQUIRE_GPU") == "1" {
			t.Fatalf("KVLAB_REQUIRE_GPU=1 and cuda.New failed: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	return gpu
}

// TestCUDAEngineParity is the engine-level check of the CUDA backend: the
// same small model of each architecture, loaded once on the CPU backend (the
// reference) and once on the GPU, serves the same requests through the
// engine without a prefix cache and with each of the three designs. It
// requires
//
//   - on each backend, every cache to give exactly that backend's uncached
//     tokens and logits bit for bit (the lesson's equality check, which
//     needs batch-invariant kernels: the cached prefix was computed in
//     another batch than its recomputation);
//   - the GPU's logits to stay within logitTolerance of the CPU's
//     (normwise per row) and its greedy tokens to equal the CPU's, except
//     where the CPU's two best logits are closer than the two backends'
//     logits are to each other (a near-tie, see divergence).
//
// The reference is the CPU backend with the GPU's bf16 rounding of a
// product's inputs (bf16Inputs) and bf16 weights, so the remaining
// differences are the order of f32 additions and the last bits of exp and
// tanh. Even these move a value across a bf16 rounding boundary now and
// then, which changes it by bf16's step (2⁻⁸ relative): on this small
// model, with its flat random logits, that is enough to decide a near-tie
// the other way now and then.
//
// It prints one line per architecture and design with the token agreement
// and the largest logit error, which scripts/gpu-check.sh records. Without
// a device it skips, unless KVLAB_REQUIRE_GPU=1.
func TestCUDAEngineParity(t *testing.T) {
	gpu := needCUDA(t)
	for _, arch := range model.BuiltinArchs {
		t.Run(arch, func(t *testing.T) {
			o := modeltest.Options(arch, 3)
			if arch == model.ArchGemma3 {
				o = modeltest.Gemma3Options(3)
			}
			o.DType = "bf16" // weights the GPU's bf16 products take as they are
			dir := filepath.Join(t.TempDir(), "model")
			require.NoError(t, model.WriteSynthetic(dir, o))

			designs := []parityDesign{{"baseline", nil}}
			for _, v := range Variants {
				designs = append(designs, parityDesign{v.Name, v.PrefixCache})
			}

			want := map[string][]engine.Result{} // CPU results by design
			for _, be := range []struct {
				name string
				b    kernels.Backend
			}{{"cpu", bf16Inputs{cpu.New()}}, {"cuda", gpu}} {
				m, err := model.Load(dir, be.b)
				require.NoError(t, err)
				var base []engine.Result
				for _, d := range designs {
					res := runParityRequests(t, m, d.build)
					if d.build == nil {
						base = res
					} else {
						requireSameResults(t, base, res, be.name+": "+d.name+" against its backend's baseline")
					}
					if be.name == "cpu" {
						want[d.name] = res
						continue
					}
					r := compareBackends(want[d.name], res)
					fmt.Printf("parity %-7s %-22s greedy tokens equal the CPU's in %d/%d requests; max logit error (normwise per row) %.2e\n",
						arch, d.name, r.same, r.total, r.maxErr)
					for _, dv := range r.divergences {
						fmt.Printf("parity %-7s %-22s   request %d parts at token %d: the CPU's top two logits %.2e apart, logits differ by up to %.2e\n",
							arch, d.name, dv.request, dv.pos, dv.gap, dv.slack)
						require.LessOrEqual(t, dv.gap, 2*dv.slack, "%s: request %d parts from the CPU at token %d where the CPU's choice was no near-tie",
							d.name, dv.request, dv.pos)
					}
					require.LessOrEqual(t, r.maxErr, logitTolerance, "%s: the GPU's logits are too far from the CPU's", d.name)
				}
				m.Close()
			}
		})
	}
}

// logitTolerance bounds ‖gpu − cpu‖ / ‖cpu‖ for one row of logits.
const logitTolerance = 2e-2

// parityDesign is one engine configuration of the parity test: a
// prefix-cache design by name, or the baseline with a nil build.
type parityDesign struct {
	name  string
	build cli.CacheBuilder
}

// runParityRequests serves two waves of requests on a fresh engine over m:
// the first wave computes three prompts that share a 40-token prefix, the
// second sends three more with the same prefix, which a prefix cache then
// serves from the first wave's KV. Prefill runs in 16-token chunks, so a
// prompt spans several steps and batches. Results are in request order.
func runParityRequests(t *testing.T, m *model.Model, build cli.CacheBuilder) []engine.Result {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.BlockSize, cfg.NumBlocks, cfg.MaxBatchTokens = 8, 256, 16
	cfg.PrefixCache = build
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	defer e.Close()

	vocab := int32(m.Config.VocabSize)
	prefix := make([]int32, 40)
	for i := range prefix {
		prefix[i] = int32(7+31*i) % vocab
	}
	var out []engine.Result
	for wave := range 2 {
		var reqs []engine.Request
		for i := range 3 {
			id := 10*wave + i
			p := append([]int32(nil), prefix...)
			for j := range 3 + 4*i + wave {
				p = append(p, int32(11+17*id+5*j)%vocab)
			}
			reqs = append(reqs, engine.Request{ID: id, Prompt: p, MaxTokens: 12, IgnoreEOS: true, KeepLogits: true})
		}
		res := e.RunAll(reqs)
		for _, r := range reqs {
			require.NoError(t, res[r.ID].Err, "request %d", r.ID)
			out = append(out, *res[r.ID])
		}
	}
	if build != nil {
		require.Positive(t, e.Stats().CachedTokens, "the second wave should reuse the first wave's prefix")
	}
	return out
}

// requireSameResults fails unless have and want hold the same tokens and
// bit-identical logits.
func requireSameResults(t *testing.T, want, have []engine.Result, what string) {
	t.Helper()
	require.Len(t, have, len(want), what)
	for i := range want {
		require.Equal(t, want[i].Tokens, have[i].Tokens, "%s: request %d's tokens", what, i)
		for p := range want[i].Logits {
			for k := range want[i].Logits[p] {
				if math.Float32bits(want[i].Logits[p][k]) != math.Float32bits(have[i].Logits[p][k]) {
					t.Fatalf("%s: request %d, token %d, logit %d: have %v; want %v (bit for bit)",
						what, i, p, k, have[i].Logits[p][k], want[i].Logits[p][k])
				}
			}
		}
	}
}

// parity is how one design's GPU run compares with its CPU run.
type parity struct {
	same, total int     // requests whose greedy tokens are all equal
	maxErr      float64 // largest ‖gpu − cpu‖ / ‖cpu‖ of a row of logits
	// divergences describe each request whose tokens part: where, and how
	// close the CPU's two candidates were there.
	divergences []divergence
}

// divergence is the first position where the GPU chose another token than
// the CPU. gap is the CPU's logit of its own choice minus its logit of the
// GPU's choice; slack is the largest |gpu − cpu| of a logit in that row. A
// gap within twice the slack is a near-tie that rounding may decide either
// way; a larger gap is a wrong result.
type divergence struct {
	request, pos int
	gap, slack   float64
}

// compareBackends compares the CPU's and the GPU's results of the same
// requests, up to each request's first different token (the texts after it
// differ, so their logits are not comparable).
func compareBackends(cpuRes, gpuRes []engine.Result) parity {
	var r parity
	for i := range cpuRes {
		r.total++
		c, g := cpuRes[i], gpuRes[i]
		equal := len(c.Tokens) == len(g.Tokens)
		for p := range min(len(c.Tokens), len(g.Tokens)) {
			var diff, norm, slack float64
			for k := range c.Logits[p] {
				d := float64(g.Logits[p][k]) - float64(c.Logits[p][k])
				diff += d * d
				norm += float64(c.Logits[p][k]) * float64(c.Logits[p][k])
				slack = math.Max(slack, math.Abs(d))
			}
			r.maxErr = math.Max(r.maxErr, math.Sqrt(diff/norm))
			if c.Tokens[p] != g.Tokens[p] {
				equal = false
				gap := float64(c.Logits[p][c.Tokens[p]]) - float64(c.Logits[p][g.Tokens[p]])
				r.divergences = append(r.divergences, divergence{i, p, gap, slack})
				break
			}
		}
		if equal {
			r.same++
		}
	}
	return r
}

// bf16Inputs is the CPU backend with the GPU's input rounding: a matrix
// product rounds x to bf16 before multiplying, as kernels/cuda's
// tensor-core kernels do, and sums in f32. With bf16 weights on both sides
// the two backends then multiply the same numbers and differ only in the
// order of f32 additions (and the last bits of exp and tanh), where a plain
// f32 CPU run would also differ by bf16's rounding of every activation,
// enough to flip a greedy choice between two close logits.
type bf16Inputs struct{ *cpu.Backend }

func (b bf16Inputs) MatMulT(dst, x, w kernels.Tensor) {
	xr := b.rounded(x)
	defer b.Free(xr)
	b.Backend.MatMulT(dst, xr, w)
}

func (b bf16Inputs) MatMulTMany(x kernels.Tensor, ps []kernels.Product) {
	xr := b.rounded(x)
	defer b.Free(xr)
	b.Backend.MatMulTMany(xr, ps)
}

// rounded returns a copy of x with every value rounded to bf16.
func (b bf16Inputs) rounded(x kernels.Tensor) kernels.Tensor {
	h := b.ToHost(x, make([]float32, x.Rows()*x.Cols()))
	for i, v := range h {
		h[i] = kernels.BF16ToF32(kernels.F32ToBF16(v))
	}
	return b.FromHost(x.Rows(), x.Cols(), h)
}

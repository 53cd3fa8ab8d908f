package main

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/internal/testgate"
	"kvlab/kernels"
)

// TestKVCacheDTypeParity is greedy parity with the KV pool in 16 bits, in
// two parts.
//
// Within one dtype (float32, bfloat16, float16), each of the three prefix
// caches reproduces the uncached engine's tokens and logits bit for bit:
// the cached blocks hold the same rounded values a recomputation writes,
// and attention reads them with the same arithmetic.
//
// Against the float32 pool, a 16-bit pool's logits stay within a normwise
// relative error per row (kvLogitTolerance), and its greedy tokens equal
// float32's except where float32's two best logits are closer than the
// two runs' logits are to each other (a near-tie the rounding may decide
// either way); the share of tokens generated before a request's first
// divergence is held above kvTokenMatch. Rows after a divergence are left
// out, and so are follow-ups to an answer that parted: the texts differ
// from there on. The test prints the measured figures that
// docs/benchmarks/kv-cache-16-bits.md quotes.
func TestKVCacheDTypeParity(t *testing.T) {
	totals := map[kernels.KVDType]*kvFigures{kernels.KVBF16: {}, kernels.KVF16: {}}
	for _, arch := range model.BuiltinArchs {
		t.Run(arch, func(t *testing.T) {
			o := modeltest.Options(arch, 5)
			if arch == model.ArchGemma3 {
				o = modeltest.Gemma3Options(5)
			}
			m := modeltest.LoadOptions(t, o)
			designs := []parityCase{{"baseline", nil}}
			for _, v := range Variants {
				designs = append(designs, parityCase{v.Name, v.PrefixCache})
			}
			base := map[kernels.KVDType][]kvResult{}
			for _, dt := range kernels.KVDTypes {
				for _, d := range designs {
					res := kvParityRun(t, m, dt, d.build, 40, 16)
					if d.build == nil {
						base[dt] = res
						continue
					}
					for i := range res {
						require.Equal(t, base[dt][i].prompt, res[i].prompt)
						requireBitEqual(t, base[dt][i].Result, res[i].Result, fmt.Sprintf("%v %s: request %d against the uncached run", dt, d.name, i))
					}
				}
			}
			for dt, f := range totals {
				f.compare(t, dt, base[kernels.KVF32], base[dt])
			}
		})
	}
	for _, dt := range []kernels.KVDType{kernels.KVBF16, kernels.KVF16} {
		totals[dt].report(t, dt, "small models")
	}
}

// TestKVCacheDTypeParityLong is the comparison with float32 on the
// built-in models' size (hidden 256, four layers, heads of 64, a
// vocabulary of 4096) and long contexts: a 1024-token shared prefix and
// 64 tokens generated per request, uncached.
func TestKVCacheDTypeParityLong(t *testing.T) {
	testgate.Long(t, "three architectures × three dtypes × 9 requests of 1000+ tokens")
	totals := map[kernels.KVDType]*kvFigures{kernels.KVBF16: {}, kernels.KVF16: {}}
	for _, arch := range model.BuiltinArchs {
		t.Run(arch, func(t *testing.T) {
			o, err := model.BuiltinFor(arch)
			require.NoError(t, err)
			m := modeltest.LoadOptions(t, o)
			base := map[kernels.KVDType][]kvResult{}
			for _, dt := range kernels.KVDTypes {
				base[dt] = kvParityRun(t, m, dt, nil, 1024, 64)
			}
			for dt, f := range totals {
				f.compare(t, dt, base[kernels.KVF32], base[dt])
			}
		})
	}
	for _, dt := range []kernels.KVDType{kernels.KVBF16, kernels.KVF16} {
		totals[dt].report(t, dt, "built-in size, 1000+ tokens")
	}
}

// kvFigures sums how a 16-bit run compares with the float32 run.
type kvFigures struct {
	maxErr, sumErr      float64 // ‖l16 − l32‖ / ‖l32‖ per row of logits
	rows, tokens, match int     // rows compared; tokens generated, and before a divergence
	same, requests      int     // requests with every token equal, and compared
}

// compare adds the comparison of have (dtype dt) with want (float32),
// request by request up to the first different token, and fails on a
// row over kvLogitTolerance or a divergence that is no near-tie.
func (f *kvFigures) compare(t *testing.T, dt kernels.KVDType, want, have []kvResult) {
	t.Helper()
	f.compareWithin(t, dt.String(), kvLogitTolerance[dt], want, have)
}

// compareWithin is compare for a run named what, with a tolerance of its
// own.
func (f *kvFigures) compareWithin(t *testing.T, what string, tol float64, want, have []kvResult) {
	t.Helper()
	for i := range want {
		w, h := want[i], have[i]
		if !slices.Equal(w.prompt, h.prompt) {
			continue // a follow-up to an answer that parted: another text
		}
		f.requests++
		n := min(len(w.Tokens), len(h.Tokens))
		p := 0
		for ; p < n; p++ {
			var diff, norm, slack float64
			for k, wl := range w.Logits[p] {
				d := float64(h.Logits[p][k]) - float64(wl)
				diff += d * d
				norm += float64(wl) * float64(wl)
				slack = math.Max(slack, math.Abs(d))
			}
			e := math.Sqrt(diff / norm)
			f.maxErr, f.sumErr, f.rows = math.Max(f.maxErr, e), f.sumErr+e, f.rows+1
			require.LessOrEqual(t, e, tol, "%s: request %d token %d: logits too far from float32's", what, i, p)
			if w.Tokens[p] != h.Tokens[p] {
				gap := float64(w.Logits[p][w.Tokens[p]]) - float64(w.Logits[p][h.Tokens[p]])
				t.Logf("%s: request %d parts from float32 at token %d of %d: float32's top two %.2e apart, logits differ by up to %.2e", what, i, p, n, gap, slack)
				require.LessOrEqual(t, gap, 2*slack, "%s: request %d parts from float32 at token %d where float32's choice was no near-tie", what, i, p)
				break
			}
		}
		f.tokens += len(w.Tokens)
		f.match += p
		if p == len(w.Tokens) {
			f.same++
		}
	}
}

// report prints the figures and holds the token match to kvTokenMatch.
func (f *kvFigures) report(t *testing.T, dt kernels.KVDType, what string) {
	t.Helper()
	f.reportAs(t, fmt.Sprintf("kv-cache-dtype %-4v", dt), kvTokenMatch[dt], what)
}

// reportAs is report for a run named run, holding its token match to least.
func (f *kvFigures) reportAs(t *testing.T, run string, least float64, what string) {
	t.Helper()
	rate := float64(f.match) / float64(f.tokens)
	fmt.Printf("%s against f32 (%s): logit error (normwise per row) max %.2e, mean %.2e over %d rows; greedy tokens before the first divergence %d/%d (%.1f%%); requests identical %d/%d\n",
		run, what, f.maxErr, f.sumErr/float64(f.rows), f.rows, f.match, f.tokens, 100*rate, f.same, f.requests)
	require.GreaterOrEqual(t, rate, least, "%s: greedy tokens matching float32's", run)
}

// kvLogitTolerance bounds ‖l16 − l32‖ / ‖l32‖ for one row of logits, with
// room over what TestKVCacheDTypeParity measures
// (docs/benchmarks/kv-cache-16-bits.md): a bfloat16 value is rounded to 8
// significant bits (relative error up to 2⁻⁹), a float16 one to 11
// (2⁻¹²), eight times finer.
var kvLogitTolerance = map[kernels.KVDType]float64{kernels.KVBF16: 2e-2, kernels.KVF16: 3e-3}

// kvTokenMatch is the least share of greedy tokens a 16-bit run must
// generate before it first parts from the float32 run.
var kvTokenMatch = map[kernels.KVDType]float64{kernels.KVBF16: 0.85, kernels.KVF16: 0.9}

// parityCase is the baseline (nil build) or one prefix cache.
type parityCase struct {
	name  string
	build cli.CacheBuilder
}

// kvParityRun serves a conversation-shaped workload on a fresh engine with
// the pool in dt: three prompts sharing a prefix of prefixLen tokens, then
// three more with the same prefix (a prefix cache serves them from the
// first wave's KV), then each first-wave prompt again with its answer and
// a new question appended (a multi-turn follow-up that reuses the answer's
// KV); each request generates gen tokens. Prefill runs in 16-token chunks
// over blocks of 8. Results are in request order.
func kvParityRun(t *testing.T, m *model.Model, dt kernels.KVDType, build cli.CacheBuilder, prefixLen, gen int) []kvResult {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.BlockSize, cfg.NumBlocks, cfg.MaxBatchTokens = 8, max(256, 4*(prefixLen+2*gen+64)/8), 16
	cfg.PrefixCache, cfg.KVCacheDType, cfg.Audit = build, dt, true
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	defer e.Close()

	vocab := int32(m.Config.VocabSize)
	prefix := make([]int32, prefixLen)
	for i := range prefix {
		prefix[i] = int32(7+31*i) % vocab
	}
	var out []kvResult
	var first [][]int32 // the first wave's prompts and answers
	for wave := range 3 {
		var reqs []engine.Request
		for i := range 3 {
			id := 10*wave + i
			var p []int32
			if wave < 2 {
				p = slices.Clone(prefix)
			} else {
				p = slices.Clone(first[i])
			}
			for j := range 3 + 4*i + wave {
				p = append(p, int32(11+17*id+5*j)%vocab)
			}
			reqs = append(reqs, engine.Request{ID: id, Prompt: p, MaxTokens: gen, IgnoreEOS: true, KeepLogits: true})
		}
		res := e.RunAll(reqs)
		for _, r := range reqs {
			require.NoError(t, res[r.ID].Err, "request %d", r.ID)
			out = append(out, kvResult{r.Prompt, *res[r.ID]})
			if wave == 0 {
				first = append(first, append(slices.Clone(r.Prompt), res[r.ID].Tokens...))
			}
		}
	}
	if build != nil {
		require.Positive(t, e.Stats().CachedTokens, "later waves should reuse earlier KV")
	}
	return out
}

// kvResult is one request's prompt and what it produced.
type kvResult struct {
	prompt []int32
	engine.Result
}

// requireBitEqual fails unless have holds want's tokens and bit-identical
// logits.
func requireBitEqual(t *testing.T, want, have engine.Result, what string) {
	t.Helper()
	require.Equal(t, want.Tokens, have.Tokens, "%s: tokens", what)
	for p := range want.Logits {
		for k := range want.Logits[p] {
			if math.Float32bits(want.Logits[p][k]) != math.Float32bits(have.Logits[p][k]) {
				t.Fatalf("%s: token %d, logit %d: have %v; want %v (bit for bit)", what, p, k, have.Logits[p][k], want.Logits[p][k])
			}
		}
	}
}

package cachetest

import (
	"fmt"
	"testing"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/common/workload"
)

// EngineModel is the small Llama-shaped model the engine benchmarks
// serve: they measure what the cache saves, not the model, so a small one
// keeps them quick.
func EngineModel(tb testing.TB) *model.Model {
	tb.Helper()
	o := model.DefaultSynth(model.ArchLlama)
	o.Vocab, o.Hidden, o.Intermediate, o.Layers = 1024, 128, 384, 2
	o.Heads, o.KVHeads, o.HeadDim = 4, 2, 32
	return modeltest.LoadOptions(tb, o)
}

// EngineSizes are the workload sizes EngineBenchmarks serves.
var EngineSizes = []struct{ Requests, Prefix int }{{8, 256}, {16, 512}}

// EngineBenchmarks runs the prefix_caching workload through the engine with
// the cache f builds (nil: no cache, the baseline) at each of EngineSizes.
// All requests are submitted at once, so the numbers measure work, not
// arrival pacing: ns/op is the time to serve the whole workload, and
// prefill-tokens/op how much of it the model had to compute (the same on
// every run and machine; EnginePrefill computes it in a test). Each variant
// calls it from a BenchmarkEngine of its own, giving the names
//
//	BenchmarkEngine/requests=N/prefix=P
func EngineBenchmarks(b *testing.B, f Factory) {
	m := EngineModel(b)
	for _, size := range EngineSizes {
		b.Run(fmt.Sprintf("requests=%d/prefix=%d", size.Requests, size.Prefix), func(b *testing.B) {
			reqs := engineWorkload(b, m, size.Requests, size.Prefix)
			var prefill int
			b.ReportAllocs()
			for b.Loop() {
				prefill = serveAll(b, m, f, reqs)
			}
			b.ReportMetric(float64(prefill), "prefill-tokens/op")
		})
	}
}

// EnginePrefill serves one of EngineBenchmarks' workloads once on m
// (EngineModel) and returns the prompt tokens the model computed: the
// benchmark's prefill-tokens/op, for tests that pin it.
func EnginePrefill(tb testing.TB, m *model.Model, f Factory, requests, prefix int) int {
	tb.Helper()
	return serveAll(tb, m, f, engineWorkload(tb, m, requests, prefix))
}

// engineWorkload is the prefix_caching workload at one size, every request
// generating 8 tokens.
func engineWorkload(tb testing.TB, m *model.Model, requests, prefix int) []workload.Request {
	tb.Helper()
	p := workload.DefaultParams("prefix_caching")
	p.Requests, p.PrefixLen = requests, prefix
	p.OutputMin, p.OutputMax = 8, 8
	p.Vocab = m.Config.VocabSize
	reqs, err := workload.Generate("prefix_caching", p)
	if err != nil {
		tb.Fatal(err)
	}
	return reqs
}

// serveAll submits every request at once to a fresh engine with the cache f
// builds (nil: none), serves them all and returns the prefill tokens.
func serveAll(tb testing.TB, m *model.Model, f Factory, reqs []workload.Request) int {
	tb.Helper()
	cfg := engine.DefaultConfig()
	if f != nil {
		cfg.PrefixCache = func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return f(a, bs) }
	}
	e, err := engine.New(m, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer e.Close()
	var ereqs []engine.Request
	for _, r := range reqs {
		ereqs = append(ereqs, engine.Request{ID: r.ID, Prompt: r.Prompt, MaxTokens: r.MaxTokens, IgnoreEOS: true})
	}
	for id, res := range e.RunAll(ereqs) {
		if res.Err != nil {
			tb.Fatalf("request %d: %v", id, res.Err)
		}
	}
	return e.Stats().PrefillTokens
}

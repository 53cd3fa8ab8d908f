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

// benchModel is a small Llama-shaped model: the engine benchmarks measure
// what the cache saves, not the model, so a small one keeps them quick.
func benchModel(b *testing.B) *model.Model {
	b.Helper()
	o := model.DefaultSynth(model.ArchLlama)
	o.Vocab, o.Hidden, o.Intermediate, o.Layers = 1024, 128, 384, 2
	o.Heads, o.KVHeads, o.HeadDim = 4, 2, 32
	return modeltest.LoadOptions(b, o)
}

// EngineBenchmarks runs the prefix_caching workload through the engine with
// the cache f builds (nil: no cache, the baseline) at a few sizes. All
// requests are submitted at once, so the numbers measure work, not arrival
// pacing: ns/op is the time to serve the whole workload, and
// prefill-tokens/op how much of it the model had to compute. Each variant
// calls it from a BenchmarkEngine of its own, giving the names
//
//	BenchmarkEngine/requests=N/prefix=P
func EngineBenchmarks(b *testing.B, f Factory) {
	m := benchModel(b)
	for _, size := range []struct{ requests, prefix int }{{8, 256}, {16, 512}} {
		b.Run(fmt.Sprintf("requests=%d/prefix=%d", size.requests, size.prefix), func(b *testing.B) {
			p := workload.DefaultParams("prefix_caching")
			p.Requests, p.PrefixLen = size.requests, size.prefix
			p.OutputMin, p.OutputMax = 8, 8
			p.Vocab = m.Config.VocabSize
			reqs, err := workload.Generate("prefix_caching", p)
			if err != nil {
				b.Fatal(err)
			}
			cfg := engine.DefaultConfig()
			if f != nil {
				cfg.PrefixCache = func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return f(a, bs) }
			}
			var prefill int
			b.ReportAllocs()
			for b.Loop() {
				e, err := engine.New(m, cfg)
				if err != nil {
					b.Fatal(err)
				}
				var ereqs []engine.Request
				for _, r := range reqs {
					ereqs = append(ereqs, engine.Request{ID: r.ID, Prompt: r.Prompt, MaxTokens: r.MaxTokens, IgnoreEOS: true})
				}
				for id, res := range e.RunAll(ereqs) {
					if res.Err != nil {
						b.Fatalf("request %d: %v", id, res.Err)
					}
				}
				prefill = e.Stats().PrefillTokens
				e.Close()
			}
			b.ReportMetric(float64(prefill), "prefill-tokens/op")
		})
	}
}

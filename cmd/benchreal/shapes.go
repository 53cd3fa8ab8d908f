package main

import (
	"fmt"
	"slices"
	"strings"

	"kvlab/common/model"
)

// shape is one model the benchmark writes and serves: a synthetic
// checkpoint (seeded random weights) with the architecture, sizes and
// token ids of a real one.
type shape struct {
	name string // as -models names it, e.g. qwen3-0.6b-bf16
	opts model.SynthOptions
}

// shapeNames are the models -models runs by default, in that order.
var shapeNames = []string{"llama3.2-1b-bf16", "llama3.2-1b-f32", "qwen3-0.6b-bf16", "gemma3-1b-bf16"}

// largeShapeNames are the phase-8 experiment's own models: -models accepts
// them, the default list leaves them out (a 1,000-token prefill takes about
// a minute each on two cores).
var largeShapeNames = []string{"llama3.2-3b-bf16", "qwen3-4b-bf16"}

// shapeFor returns the named model at its real size or, with small, at a
// few megabytes with the same architecture, dtype and layer pattern (for
// checking the whole pipeline quickly).
//
//   - Llama-3.2-1B: hidden 2048, 16 layers, 32 query heads and 8 KV heads
//     of 64, intermediate 8192, vocabulary 128256, tied embeddings, RoPE
//     theta 500000 with Llama 3's scaling (factor 32), bos 128000, eos
//     128001.
//   - Qwen3-0.6B: hidden 1024, 28 layers, 16 query heads and 8 KV heads of
//     128 with q/k norms, intermediate 3072, vocabulary 151936, tied, theta
//     1000000, bos 151643, eos 151645.
//   - Llama-3.2-3B-Instruct: hidden 3072, 28 layers, 24 query heads and 8
//     KV heads of 128, intermediate 8192, vocabulary 128256, tied, RoPE as
//     the 1B's, bos 128000, eos 128001 (3,212,749,824 parameters).
//   - Qwen3-4B: hidden 2560, 36 layers, 32 query heads and 8 KV heads of 128
//     with q/k norms, intermediate 9728, vocabulary 151936, tied, theta
//     1000000, bos 151643, eos 151645 (4,022,468,096 parameters).
//   - Gemma-3-1B (its config.json): hidden 1152, 26 layers, 4 query heads
//     and 1 KV head of 256, query_pre_attn_scalar 256, intermediate 6912,
//     vocabulary 262144, tied, five sliding-window layers (window 512, RoPE
//     theta 10000) to one global (theta 1000000), no soft caps, bos 2, eos
//     1.
func shapeFor(name string, small bool) (shape, error) {
	if !slices.Contains(shapeNames, name) && !slices.Contains(largeShapeNames, name) {
		return shape{}, fmt.Errorf("unknown model %q (want %s)", name, strings.Join(append(slices.Clone(shapeNames), largeShapeNames...), ", "))
	}
	var o model.SynthOptions
	switch {
	case strings.HasPrefix(name, "llama3.2-1b-"):
		o = model.DefaultSynth(model.ArchLlama)
		o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 2048, 16, 32, 8, 64, 8192, 128256
		o.BOS, o.EOS = 128000, 128001
		if small {
			o.Hidden, o.Layers, o.Heads, o.KVHeads, o.Intermediate, o.Vocab = 256, 2, 4, 1, 512, 4096
			o.BOS, o.EOS = 1, 2
		}
	case strings.HasPrefix(name, "llama3.2-3b-"):
		o = model.DefaultSynth(model.ArchLlama)
		o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 3072, 28, 24, 8, 128, 8192, 128256
		o.BOS, o.EOS = 128000, 128001
		if small {
			o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 384, 2, 3, 1, 128, 1024, 4096
			o.BOS, o.EOS = 1, 2
		}
	case strings.HasPrefix(name, "qwen3-4b-"):
		o = model.DefaultSynth(model.ArchQwen3)
		o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 2560, 36, 32, 8, 128, 9728, 151936
		o.BOS, o.EOS = 151643, 151645
		if small {
			o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 320, 2, 4, 1, 128, 1216, 4096
			o.BOS, o.EOS = 1, 2
		}
	case strings.HasPrefix(name, "qwen3-0.6b-"):
		o = model.DefaultSynth(model.ArchQwen3)
		o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 1024, 28, 16, 8, 128, 3072, 151936
		o.BOS, o.EOS = 151643, 151645
		if small {
			o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 256, 2, 4, 2, 64, 512, 4096
			o.BOS, o.EOS = 1, 2
		}
	case strings.HasPrefix(name, "gemma3-1b-"):
		o = model.DefaultSynth(model.ArchGemma3)
		o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 1152, 26, 4, 1, 256, 6912, 262144
		o.QueryPreAttnScalar = 256
		if small {
			// Six layers keep the 5:1 pattern; head_dim 64 is its own
			// query_pre_attn_scalar, as llama.cpp assumes.
			o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate, o.Vocab = 256, 6, 4, 1, 64, 512, 4096
			o.QueryPreAttnScalar = 64
		}
	}
	o.DType = name[strings.LastIndex(name, "-")+1:]
	o.Tied = true
	if _, err := o.Config(); err != nil {
		return shape{}, err
	}
	return shape{name: name, opts: o}, nil
}

package main

import (
	"slices"
	"sync"
	"time"

	"kvlab/common/model"
)

// What bounds each figure, as arithmetic on the model's shape.
//
// Prefill is bound by arithmetic: a prompt of T tokens costs 2 FLOPs per
// weight of every layer's projections per token (a multiply and an add),
// the LM head once (only the last position's logits are computed), and
// attention 4 · heads · head_dim FLOPs per (query, visible key) pair (q·k
// and the weighted sum of v). Decode is bound by memory: each token reads
// every projection weight, the LM head (the tied embeddings) and the keys
// and values of every position its layers see.

// layerParams is the number of weights in one layer's projections: q, k,
// v, o and the three of the MLP.
func layerParams(c *model.Config) int64 {
	h, q, kv, inter := int64(c.HiddenSize), int64(c.QDim()), int64(c.KVDim()), int64(c.IntermediateSize)
	return h*q + 2*h*kv + q*h + 3*h*inter
}

// headParams is the number of weights of the LM head (the embeddings when
// tied).
func headParams(c *model.Config) int64 { return int64(c.VocabSize) * int64(c.HiddenSize) }

// visible returns how many keys the query at position p (0-based) sees in
// layer l: every earlier position and its own, or the sliding window's.
func visible(c *model.Config, l, p int) int {
	n := p + 1
	if w := c.LayerWindow(l); w > 0 {
		n = min(n, w)
	}
	return n
}

// prefillFLOPs is the arithmetic of computing a prompt of t tokens from
// scratch and the first token's logits.
func prefillFLOPs(c *model.Config, t int) float64 {
	f := 2 * float64(layerParams(c)) * float64(c.NumHiddenLayers) * float64(t)
	f += 2 * float64(headParams(c))
	f += attentionFLOPs(c, 0, t)
	return f
}

// attentionFLOPs is the attention arithmetic of the queries at positions
// [from, to), every layer.
func attentionFLOPs(c *model.Config, from, to int) float64 {
	var pairs float64
	for l := range c.NumHiddenLayers {
		for p := from; p < to; p++ {
			pairs += float64(visible(c, l, p))
		}
	}
	return 4 * float64(c.NumAttentionHeads*c.HeadDim) * pairs
}

// weightBytes is what one decode step reads of the weights: every
// projection and the LM head at the checkpoint's dtype (norm weights are
// a few kilobytes and left out).
func weightBytes(c *model.Config, dtypeBytes int) float64 {
	return float64(layerParams(c)*int64(c.NumHiddenLayers)+headParams(c)) * float64(dtypeBytes)
}

// kvBytes is the KV cache a decode step at position p reads: the keys and
// values each layer sees, at kvElem bytes an element.
func kvBytes(c *model.Config, p int, kvElem float64) float64 {
	var keys int
	for l := range c.NumHiddenLayers {
		keys += visible(c, l, p)
	}
	return float64(keys) * float64(c.KVDim()) * 2 * kvElem
}

// decodeBytes is the average bytes read per token while generating n
// tokens after a prompt of t: weights plus KV, the KV averaged over the
// positions the n steps run at.
func decodeBytes(c *model.Config, dtypeBytes int, kvElem float64, t, n int) float64 {
	var kv float64
	for p := t; p < t+n; p++ {
		kv += kvBytes(c, p, kvElem)
	}
	return weightBytes(c, dtypeBytes) + kv/float64(max(n, 1))
}

// dtypeSize is the bytes of one weight of a synthetic dtype.
func dtypeSize(dtype string) int {
	if dtype == "f32" {
		return 4
	}
	return 2
}

// kvSize is the bytes of one KV element of a cache dtype (f32, f16, bf16,
// q8_0 as 34 bytes per 32).
func kvSize(dtype string) float64 {
	switch dtype {
	case "f32":
		return 4
	case "q8_0":
		return 34.0 / 32
	}
	return 2
}

// readBandwidth measures how fast threads goroutines can read a buffer of
// size bytes: each loads one word of every 64-byte cache line of its
// share, which makes the memory deliver the whole line, from eight places
// in its share at once, so that as many lines are in flight as the core
// allows and the loads, not the arithmetic, set the pace. Decode only reads
// its weights and KV, so this, not a copy, is the rate it could reach
// (it counts every byte of every line read). It returns the best of reps
// passes after one that touches the pages, in bytes per second.
func readBandwidth(size, threads, reps int) float64 {
	const line, streams = 64 / 8, 8 // words per cache line; places read at once
	words := size / 8 / (threads * streams * line) * (threads * streams * line)
	src := make([]uint64, words)
	for i := range src {
		src[i] = uint64(i)
	}
	sums := make([]uint64, threads)
	part := words / threads
	best := bestPass(threads, reps, func(w int) {
		mine := src[w*part : (w+1)*part]
		lane := len(mine) / streams
		var s uint64
		for i := 0; i < lane; i += line {
			for k := range streams {
				s += mine[k*lane+i]
			}
		}
		sums[w] = s
	})
	var total uint64
	for _, s := range sums {
		total += s
	}
	if total == 0 { // keeps the loads; a buffer of 0, 1, 2, ... never sums to 0
		panic("readBandwidth: nothing read")
	}
	return float64(8*words) / best.Seconds()
}

// copyBandwidth measures memory bandwidth the way STREAM's Copy does:
// threads goroutines each copy their share of a buffer of size bytes into
// another, and the rate counts the bytes read and the bytes written. It
// returns the best of reps passes (the first touches the pages and is
// left out), in bytes per second.
func copyBandwidth(size, threads, reps int) float64 {
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	part := (size + threads - 1) / threads
	best := bestPass(threads, reps, func(w int) {
		lo, hi := min(w*part, size), min((w+1)*part, size)
		copy(dst[lo:hi], src[lo:hi])
	})
	return 2 * float64(size) / best.Seconds()
}

// bestPass runs work(w) on threads goroutines at once, w = 0..threads-1,
// once to touch the pages and then reps times, and returns the shortest
// of the timed passes.
func bestPass(threads, reps int, work func(w int)) time.Duration {
	pass := func() time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(w)
			}()
		}
		wg.Wait()
		return time.Since(t0)
	}
	pass()
	var ds []time.Duration
	for range max(reps, 1) {
		ds = append(ds, pass())
	}
	return slices.Min(ds)
}

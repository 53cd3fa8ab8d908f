//go:build cuda || cudaemu

package cuda

import (
	"testing"

	"kvlab/kernels"
)

// The host side of a decode step: about 230 launches and six metadata
// uploads, each of which used to allocate (two C arrays per launch in
// gorgonia.org/cu's Function.Launch) or wait for the GPU (a copy from
// pageable memory). These tests pin down what replaced them: launches
// that allocate nothing, and uploads through a pinned staging buffer with
// asynchronous copies whose results equal the synchronous path's.

// stepFixture is a two-layer toy decode step: embedding, per layer an
// RMSNorm, q/k/v products, RoPE, a KV-cache write and paged attention,
// an output product and the residual, then the logits and their argmax.
type stepFixture struct {
	table, x, h, q, k, v, att, o, logits kernels.Tensor
	norm, wq, wk, wv, wo, wout           kernels.Tensor
	kc, vc                               kernels.Tensor
	sh                                   kernels.AttnShape
	invFreq                              []float32
	ids, pos, slots                      []int32
	seqs                                 []kernels.AttnSeq
}

const (
	stepSeqs   = 3
	stepHidden = 64
	stepHeads  = 4
	stepKV     = 2
	stepHD     = 16
	stepBS     = 4
	stepVocab  = 40
	stepBlocks = 64
)

func newStepFixture(be *Backend) *stepFixture {
	rng := newRand(77)
	f := &stepFixture{sh: attnShape(stepHeads, stepKV, stepHD, stepBS), invFreq: llamaInvFreq(stepHD)}
	rnd := func(rows, cols int) kernels.Tensor {
		return be.FromHost(rows, cols, randFloats(rng, rows*cols, 1))
	}
	f.table, f.norm = rnd(stepVocab, stepHidden), rnd(1, stepHidden)
	f.wq, f.wo = rnd(stepHeads*stepHD, stepHidden), rnd(stepHidden, stepHeads*stepHD)
	f.wk, f.wv = rnd(stepKV*stepHD, stepHidden), rnd(stepKV*stepHD, stepHidden)
	f.wout = rnd(stepVocab, stepHidden)
	f.kc, f.vc = rnd(stepBlocks*stepBS, stepKV*stepHD), rnd(stepBlocks*stepBS, stepKV*stepHD)
	f.x, f.h = be.New(stepSeqs, stepHidden), be.New(stepSeqs, stepHidden)
	f.q, f.att = be.New(stepSeqs, stepHeads*stepHD), be.New(stepSeqs, stepHeads*stepHD)
	f.k, f.v = be.New(stepSeqs, stepKV*stepHD), be.New(stepSeqs, stepKV*stepHD)
	f.o, f.logits = be.New(stepSeqs, stepHidden), be.New(stepSeqs, stepVocab)
	f.ids, f.pos, f.slots = make([]int32, stepSeqs), make([]int32, stepSeqs), make([]int32, stepSeqs)
	for s := range stepSeqs {
		pages := make([]int32, stepBlocks/stepSeqs)
		for i := range pages {
			pages[i] = int32(i*stepSeqs + s) // interleaved, so a wrong page table reads another sequence
		}
		f.seqs = append(f.seqs, kernels.AttnSeq{QStart: s, QLen: 1, Pages: pages})
	}
	return f
}

// setStep makes the fixture's metadata that of decode step i: every
// sequence one token further, so that positions, slots and page-table
// lengths change and are uploaded again.
func (f *stepFixture) setStep(i int) {
	for s := range f.seqs {
		ctx := 5 + 3*s + i
		f.seqs[s].CtxLen = ctx
		f.pos[s] = int32(ctx - 1)
		f.slots[s] = f.seqs[s].Pages[(ctx-1)/stepBS]*stepBS + int32((ctx-1)%stepBS)
		f.ids[s] = int32((7*s + 3*i) % stepVocab)
	}
}

// step runs one decode step and returns the argmax of the logits.
func (f *stepFixture) step(be *Backend) []int32 {
	be.Embed(f.x, f.table, f.ids)
	for range 2 {
		be.RMSNorm(f.h, f.x, f.norm, 1e-5)
		be.MatMulT(f.q, f.h, f.wq)
		be.MatMulT(f.k, f.h, f.wk)
		be.MatMulT(f.v, f.h, f.wv)
		be.RoPE(f.q, f.pos, stepHD, f.invFreq)
		be.RoPE(f.k, f.pos, stepHD, f.invFreq)
		be.WriteKV(f.kc, f.vc, f.k, f.v, f.slots)
		be.Attend(f.att, f.q, f.kc, f.vc, f.seqs, f.sh)
		be.MatMulT(f.o, f.att, f.wo)
		be.Add(f.x, f.o)
	}
	be.MatMulT(f.logits, f.x, f.wout)
	return be.ArgmaxRows(f.logits)
}

func (f *stepFixture) free(be *Backend) {
	for _, t := range []kernels.Tensor{f.table, f.x, f.h, f.q, f.k, f.v, f.att, f.o, f.logits,
		f.norm, f.wq, f.wk, f.wv, f.wo, f.wout, f.kc, f.vc} {
		be.Free(t)
	}
}

// TestLaunchAllocations counts the Go allocations of single launches and of
// a whole decode step with changing metadata (testing.AllocsPerRun). A
// launch allocates nothing: the arguments go through the backend's own
// array, and (with -tags cuda) into C arrays allocated once. A step's one
// allocation is the []int32 ArgmaxRows returns.
func TestLaunchAllocations(t *testing.T) {
	be := needGPU(t)
	f := newStepFixture(be)
	defer f.free(be)
	f.setStep(0)
	f.step(be) // grows the metadata and staging buffers

	i := 0
	launches := []struct {
		name string
		run  func()
	}{
		{"Add", func() { be.Add(f.x, f.o) }},
		{"RMSNorm", func() { be.RMSNorm(f.h, f.x, f.norm, 1e-5) }},
		{"MatMulT", func() { be.MatMulT(f.q, f.h, f.wq) }},
		{"RoPE, new positions", func() { i++; f.pos[0] = int32(i % 7); be.RoPE(f.q, f.pos, stepHD, f.invFreq) }},
		{"WriteKV", func() { be.WriteKV(f.kc, f.vc, f.k, f.v, f.slots) }},
		{"Attend", func() { be.Attend(f.att, f.q, f.kc, f.vc, f.seqs, f.sh) }},
	}
	for _, l := range launches {
		if got := testing.AllocsPerRun(5, l.run); got != 0 {
			t.Errorf("%s: %v allocations per call, want 0", l.name, got)
		}
	}
	step := 1
	got := testing.AllocsPerRun(3, func() {
		f.setStep(step % 4)
		step++
		f.step(be)
	})
	t.Logf("a decode step of %d sequences, 2 layers: %v allocations", stepSeqs, got)
	if got > 1 {
		t.Errorf("a decode step allocates %v times, want 1 (ArgmaxRows' result)", got)
	}
}

// TestAsyncUploadsMatchSync runs the same decode steps on a backend that
// uploads metadata through the pinned staging buffer with asynchronous
// copies (the default) and on one that uses synchronous copies from
// pageable memory (KVLAB_CUDA_PAGEABLE=1), and requires the same bits.
// The staging buffer is made small (512 bytes), so that it fills up
// between two synchronisation points again and again and must wait for
// its queued copies before it starts over. On the emulator a queued copy runs
// only just before the next launch or copy, as on a GPU's stream, so a
// staged byte overwritten too early shows up as a wrong result here.
func TestAsyncUploadsMatchSync(t *testing.T) {
	needGPU(t)
	run := func(pageable bool) ([][]int32, []float32) {
		nb, err := New()
		if err != nil {
			t.Fatal(err)
		}
		be := nb.(*Backend)
		defer be.Close()
		be.pageable = pageable
		be.stage.first = 512 // two uploads fill it: it starts over several times a step
		f := newStepFixture(be)
		defer f.free(be)

		// Between steps, rows gathered with ever different indices and no
		// synchronisation point: uploads of 256 bytes each.
		const rows = 64
		src := be.FromHost(rows, 1, randFloats(newRand(5), rows, 1))
		dst := be.New(rows, 1)
		acc := be.New(rows, 1)
		defer func() { be.Free(src); be.Free(dst); be.Free(acc) }()
		idx := make([]int32, rows)

		var tokens [][]int32
		for i := range 6 {
			f.setStep(i)
			tokens = append(tokens, f.step(be))
			for j := range 10 {
				for r := range idx {
					idx[r] = int32((r*(2*j+1) + i) % rows)
				}
				be.GatherRows(dst, src, idx)
				be.Add(acc, dst)
			}
		}
		return tokens, append(be.ToHost(f.kc, make([]float32, stepBlocks*stepBS*stepKV*stepHD)),
			be.ToHost(acc, make([]float32, rows))...)
	}
	syncTokens, syncData := run(true)
	asyncTokens, asyncData := run(false)
	for i := range syncTokens {
		for s := range syncTokens[i] {
			if syncTokens[i][s] != asyncTokens[i][s] {
				t.Fatalf("step %d sequence %d: token %d with async uploads, %d with synchronous ones",
					i, s, asyncTokens[i][s], syncTokens[i][s])
			}
		}
	}
	requireEqual(t, asyncData, syncData, "KV cache and gathered sums, async against synchronous uploads")
}

// BenchmarkDecodeStep times the toy decode step of TestLaunchAllocations
// (two layers, 23 launches, 6 metadata uploads, one argmax) with
// metadata uploaded through the pinned staging buffer (async) and by
// synchronous copies from pageable memory (pageable). Its kernels are tiny,
// so on a GPU the time is almost all host overhead: launches, uploads and
// the final wait.
func BenchmarkDecodeStep(b *testing.B) {
	be := needGPU(b)
	for _, pageable := range []bool{false, true} {
		name := "async"
		if pageable {
			name = "pageable"
		}
		b.Run(name, func(b *testing.B) {
			defer func(p bool) { be.pageable = p }(be.pageable)
			be.pageable = pageable
			f := newStepFixture(be)
			defer f.free(be)
			i := 0
			for b.Loop() {
				f.setStep(i % 4)
				i++
				f.step(be)
			}
		})
	}
}

package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// seqSpec is one sequence of an attention test: qlen query rows ending at
// position ctx-1.
type seqSpec struct{ qlen, ctx int }

// attnFixture is a paged cache plus queries, together with the same keys and
// values laid out contiguously per sequence for the dense reference.
type attnFixture struct {
	sh         kernels.AttnShape
	seqs       []kernels.AttnSeq
	q, kc, vc  kernels.Tensor
	keys, vals [][]float32 // per sequence: ctx × NumKVHeads*HeadDim
}

func shapeOf(heads, kvHeads, hd, bs int) kernels.AttnShape {
	return kernels.AttnShape{
		NumHeads: heads, NumKVHeads: kvHeads, HeadDim: hd, BlockSize: bs,
		Scale: float32(1 / math.Sqrt(float64(hd))),
	}
}

// newAttnFixture scatters every sequence's keys and values over shuffled
// blocks of a pool that also holds unused, random blocks, so that reading a
// wrong slot shows up as a wrong answer.
func newAttnFixture(t *testing.T, be *cpu.Backend, rng *rand.Rand, sh kernels.AttnShape, specs []seqSpec) *attnFixture {
	t.Helper()
	kvCols := sh.NumKVHeads * sh.HeadDim
	f := &attnFixture{sh: sh}
	for _, s := range specs {
		f.keys = append(f.keys, randFloats(rng, s.ctx*kvCols))
		f.vals = append(f.vals, randFloats(rng, s.ctx*kvCols))
	}
	f.place(t, be, rng, specs)
	return f
}

// place writes the fixture's keys and values into a fresh paged cache with
// block size f.sh.BlockSize and a random page assignment, and draws nothing
// else from rng except the layout and the filler, so that two placements of
// the same fixture differ only in where the data sits.
func (f *attnFixture) place(t *testing.T, be *cpu.Backend, rng *rand.Rand, specs []seqSpec) {
	t.Helper()
	bs, kvCols := f.sh.BlockSize, f.sh.NumKVHeads*f.sh.HeadDim
	total := 3 // spare blocks
	for _, s := range specs {
		total += (s.ctx + bs - 1) / bs
	}
	perm := rng.Perm(total)
	f.kc = randTensor(be, rng, total*bs, kvCols)
	f.vc = randTensor(be, rng, total*bs, kvCols)
	if f.q == nil {
		n := 0
		for _, s := range specs {
			n += s.qlen
		}
		f.q = randTensor(be, rng, n, f.sh.NumHeads*f.sh.HeadDim)
	}
	f.seqs = f.seqs[:0]
	next, qStart := 0, 0
	for si, s := range specs {
		pages := make([]int32, (s.ctx+bs-1)/bs)
		for i := range pages {
			pages[i] = int32(perm[next])
			next++
		}
		slots := make([]int32, s.ctx)
		for j := range slots {
			slots[j] = pages[j/bs]*int32(bs) + int32(j%bs)
		}
		if s.ctx > 0 {
			be.WriteKV(f.kc, f.vc, be.FromHost(s.ctx, kvCols, f.keys[si]), be.FromHost(s.ctx, kvCols, f.vals[si]), slots)
		}
		f.seqs = append(f.seqs, kernels.AttnSeq{QStart: qStart, QLen: s.qlen, CtxLen: s.ctx, Pages: pages})
		qStart += s.qlen
	}
}

// denseAttention is plain causal attention (with sh's window and soft cap,
// if any) in float64 over contiguous
// per-sequence keys and values: the reference Attend must match.
func denseAttention(q []float32, keys, vals [][]float32, seqs []kernels.AttnSeq, sh kernels.AttnShape) []float64 {
	hd, qCols, kvCols := sh.HeadDim, sh.NumHeads*sh.HeadDim, sh.NumKVHeads*sh.HeadDim
	group := sh.NumHeads / sh.NumKVHeads
	out := make([]float64, len(q))
	for s, seq := range seqs {
		for i := range seq.QLen {
			pos := seq.CtxLen - seq.QLen + i
			row := seq.QStart + i
			for h := range sh.NumHeads {
				qh := q[row*qCols+h*hd : row*qCols+(h+1)*hd]
				kvOff := (h / group) * hd
				// A window hides every key at or before pos-Window.
				first := 0
				if sh.Window > 0 && pos-sh.Window+1 > 0 {
					first = pos - sh.Window + 1
				}
				scores := make([]float64, pos+1)
				maxScore := math.Inf(-1)
				for j := range scores {
					if j < first {
						scores[j] = math.Inf(-1)
						continue
					}
					k := keys[s][j*kvCols+kvOff:]
					var dot float64
					for d := range hd {
						dot += float64(qh[d]) * float64(k[d])
					}
					scores[j] = dot * float64(sh.Scale)
					if c := float64(sh.SoftCap); c > 0 {
						scores[j] = c * math.Tanh(scores[j]/c)
					}
					maxScore = math.Max(maxScore, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - maxScore)
					sum += scores[j]
				}
				o := out[row*qCols+h*hd : row*qCols+(h+1)*hd]
				for j, w := range scores {
					v := vals[s][j*kvCols+kvOff:]
					for d := range hd {
						o[d] += w / sum * float64(v[d])
					}
				}
			}
		}
	}
	return out
}

// attnCase is one shape and batch of TestAttendMatchesDense.
type attnCase struct {
	name                   string
	heads, kvHeads, hd, bs int
	specs                  []seqSpec
}

func TestAttendMatchesDense(t *testing.T) {
	tests := []attnCase{
		{"decode/bs=16", 4, 4, 8, 16, []seqSpec{{1, 1}, {1, 17}, {1, 33}, {1, 16}}},
		{"prefill/bs=1", 2, 2, 8, 1, []seqSpec{{5, 5}, {7, 7}, {1, 1}}},
		{"mixed/gqa/bs=2", 4, 2, 6, 2, []seqSpec{{1, 9}, {6, 6}, {4, 13}, {1, 2}, {3, 20}}},
		{"mixed/gqa/bs=16/hd=64", 8, 2, 64, 16, []seqSpec{{1, 40}, {32, 32}, {16, 50}, {1, 1}, {17, 17}}},
		{"mqa/bs=3/odd-head", 4, 1, 5, 3, []seqSpec{{2, 7}, {1, 4}, {9, 9}}},
	}
	rng := newRand(7)
	for seed := range 6 {
		bs := []int{1, 2, 16}[seed%3]
		kvHeads := 1 + rng.IntN(3)
		specs := make([]seqSpec, 1+rng.IntN(6))
		for i := range specs {
			ctx := 1 + rng.IntN(70)
			qlen := 1
			if rng.IntN(2) == 0 {
				qlen = 1 + rng.IntN(ctx)
			}
			specs[i] = seqSpec{qlen, ctx}
		}
		tests = append(tests, attnCase{
			name:  fmt.Sprintf("random-%d/bs=%d", seed, bs),
			heads: kvHeads * (1 + rng.IntN(3)), kvHeads: kvHeads, hd: 2 + rng.IntN(40), bs: bs,
			specs: specs,
		})
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			be := cpu.New()
			rng := newRand(uint64(len(tc.name)))
			f := newAttnFixture(t, be, rng, shapeOf(tc.heads, tc.kvHeads, tc.hd, tc.bs), tc.specs)
			out := be.New(f.q.Rows(), f.q.Cols())
			be.Attend(out, f.q, f.kc, f.vc, f.seqs, f.sh)
			want := denseAttention(cpu.Data(f.q), f.keys, f.vals, f.seqs, f.sh)
			requireClose(t, cpu.Data(out), want, 1e-5, "out")
		})
	}
}

// TestAttendBatchInvariant checks bit for bit that a query's output depends
// only on its own row, keys and values: not on the other sequences in the
// call, its row index, whether it is a decode or part of a prefill chunk, the
// number of goroutines, or the cache's block size and page layout.
func TestAttendBatchInvariant(t *testing.T) {
	// A head width that is not a multiple of four puts rows at every
	// alignment, which would expose any dependence on where data sits.
	for _, hd := range []int{16, 5} {
		t.Run(fmt.Sprintf("hd=%d", hd), func(t *testing.T) { testAttendBatchInvariant(t, shapeOf(4, 2, hd, 4)) })
	}
}

func testAttendBatchInvariant(t *testing.T, sh kernels.AttnShape) {
	specs := []seqSpec{{1, 30}, {12, 40}, {1, 1}, {7, 7}, {5, 64}, {1, 65}}
	be := cpu.New()
	rng := newRand(11)
	f := newAttnFixture(t, be, rng, sh, specs)
	qCols := f.q.Cols()
	full := be.New(f.q.Rows(), qCols)
	be.Attend(full, f.q, f.kc, f.vc, f.seqs, sh)
	want := cpu.Data(full)
	rowsOf := func(row, n int) []float32 { return want[row*qCols : (row+n)*qCols] }

	t.Run("alone", func(t *testing.T) {
		for s, seq := range f.seqs {
			out := be.New(seq.QLen, qCols)
			alone := seq
			alone.QStart = 0
			be.Attend(out, be.View(f.q, seq.QStart, seq.QLen), f.kc, f.vc, []kernels.AttnSeq{alone}, sh)
			requireBitEqual(t, cpu.Data(out), rowsOf(seq.QStart, seq.QLen), fmt.Sprintf("sequence %d", s))
		}
	})

	t.Run("reversed-batch", func(t *testing.T) {
		// Same sequences in the opposite order, so every query moves to
		// another row and has other neighbours.
		q := be.New(f.q.Rows(), qCols)
		var seqs []kernels.AttnSeq
		row := 0
		for s := len(f.seqs) - 1; s >= 0; s-- {
			seq := f.seqs[s]
			copy(cpu.Data(q)[row*qCols:], cpu.Data(f.q)[seq.QStart*qCols:(seq.QStart+seq.QLen)*qCols])
			seq.QStart = row
			seqs = append(seqs, seq)
			row += seq.QLen
		}
		out := be.New(f.q.Rows(), qCols)
		be.Attend(out, q, f.kc, f.vc, seqs, sh)
		for i, seq := range seqs {
			orig := f.seqs[len(f.seqs)-1-i]
			requireBitEqual(t, cpu.Data(out)[seq.QStart*qCols:(seq.QStart+seq.QLen)*qCols],
				rowsOf(orig.QStart, orig.QLen), fmt.Sprintf("sequence %d", len(f.seqs)-1-i))
		}
	})

	t.Run("chunk-as-decodes", func(t *testing.T) {
		for s, seq := range f.seqs {
			for i := range seq.QLen {
				dec := kernels.AttnSeq{QStart: 0, QLen: 1, CtxLen: seq.CtxLen - seq.QLen + i + 1, Pages: seq.Pages}
				out := be.New(1, qCols)
				be.Attend(out, be.View(f.q, seq.QStart+i, 1), f.kc, f.vc, []kernels.AttnSeq{dec}, sh)
				requireBitEqual(t, cpu.Data(out), rowsOf(seq.QStart+i, 1), fmt.Sprintf("sequence %d row %d", s, i))
			}
		}
	})

	t.Run("workers", func(t *testing.T) {
		for _, w := range []int{1, 2, 5} {
			bw := cpu.NewWithWorkers(w)
			out := bw.New(f.q.Rows(), qCols)
			bw.Attend(out, f.q, f.kc, f.vc, f.seqs, sh)
			requireBitEqual(t, cpu.Data(out), want, fmt.Sprintf("workers=%d", w))
		}
	})

	t.Run("layout", func(t *testing.T) {
		for _, bs := range []int{1, 2, 16} {
			g := *f
			g.sh.BlockSize = bs
			g.seqs = nil
			g.place(t, be, newRand(uint64(bs)), specs)
			out := be.New(f.q.Rows(), qCols)
			be.Attend(out, g.q, g.kc, g.vc, g.seqs, g.sh)
			requireBitEqual(t, cpu.Data(out), want, fmt.Sprintf("block size %d", bs))
		}
	})
}

// stepKV lays the fixture's keys and values out as one step's k and v
// tensors, row for row with the queries, as AttendLocal expects. Only the
// chunk's own tokens (the last qlen of each sequence) are included.
func stepKV(be *cpu.Backend, f *attnFixture) (k, v kernels.Tensor) {
	kvCols := f.sh.NumKVHeads * f.sh.HeadDim
	k, v = be.New(f.q.Rows(), kvCols), be.New(f.q.Rows(), kvCols)
	for s, seq := range f.seqs {
		from := (seq.CtxLen - seq.QLen) * kvCols
		copy(cpu.Data(k)[seq.QStart*kvCols:], f.keys[s][from:])
		copy(cpu.Data(v)[seq.QStart*kvCols:], f.vals[s][from:])
	}
	return k, v
}

func TestAttendLocal(t *testing.T) {
	be := cpu.New()
	for _, bs := range []int{1, 2, 16} {
		t.Run(fmt.Sprintf("whole-prompt/bs=%d", bs), func(t *testing.T) {
			// With CtxLen == QLen the cache holds exactly the chunk, so both
			// paths must run the same arithmetic on the same numbers.
			specs := []seqSpec{{1, 1}, {9, 9}, {33, 33}, {4, 4}}
			f := newAttnFixture(t, be, newRand(uint64(bs)), shapeOf(6, 3, 7, bs), specs)
			k, v := stepKV(be, f)
			paged, local := be.New(f.q.Rows(), f.q.Cols()), be.New(f.q.Rows(), f.q.Cols())
			be.Attend(paged, f.q, f.kc, f.vc, f.seqs, f.sh)
			be.AttendLocal(local, f.q, k, v, f.seqs, f.sh)
			requireBitEqual(t, cpu.Data(local), cpu.Data(paged), "AttendLocal vs Attend")
		})
	}

	t.Run("sees-only-its-chunk", func(t *testing.T) {
		// A chunk that starts after position 0 attends to its own tokens
		// only: the same as a whole-prompt call on just those tokens.
		specs := []seqSpec{{4, 10}, {1, 3}, {6, 6}}
		f := newAttnFixture(t, be, newRand(3), shapeOf(4, 2, 8, 4), specs)
		k, v := stepKV(be, f)
		local := be.New(f.q.Rows(), f.q.Cols())
		be.AttendLocal(local, f.q, k, v, f.seqs, f.sh)

		var keys, vals [][]float32
		short := make([]kernels.AttnSeq, len(f.seqs))
		kvCols := f.sh.NumKVHeads * f.sh.HeadDim
		for s, seq := range f.seqs {
			from := (seq.CtxLen - seq.QLen) * kvCols
			keys = append(keys, f.keys[s][from:])
			vals = append(vals, f.vals[s][from:])
			short[s] = kernels.AttnSeq{QStart: seq.QStart, QLen: seq.QLen, CtxLen: seq.QLen}
		}
		want := denseAttention(cpu.Data(f.q), keys, vals, short, f.sh)
		requireClose(t, cpu.Data(local), want, 1e-5, "out")

		shortLocal := be.New(f.q.Rows(), f.q.Cols())
		be.AttendLocal(shortLocal, f.q, k, v, short, f.sh)
		requireBitEqual(t, cpu.Data(local), cpu.Data(shortLocal), "CtxLen>QLen vs CtxLen==QLen")
	})
}

func TestAttendRejectsBadInput(t *testing.T) {
	be := cpu.New()
	sh := shapeOf(4, 2, 8, 4)
	q, out := be.New(3, 32), be.New(3, 32)
	kc, vc := be.New(8, 16), be.New(8, 16)
	tests := map[string]struct {
		seqs []kernels.AttnSeq
		sh   kernels.AttnShape
	}{
		"too few pages":      {[]kernels.AttnSeq{{QStart: 0, QLen: 1, CtxLen: 5, Pages: []int32{0}}}, sh},
		"page outside cache": {[]kernels.AttnSeq{{QStart: 0, QLen: 1, CtxLen: 2, Pages: []int32{2}}}, sh},
		"rows past q":        {[]kernels.AttnSeq{{QStart: 2, QLen: 2, CtxLen: 2, Pages: []int32{0}}}, sh},
		"qlen over ctx":      {[]kernels.AttnSeq{{QStart: 0, QLen: 3, CtxLen: 2, Pages: []int32{0}}}, sh},
		"heads not grouped":  {nil, shapeOf(4, 3, 8, 4)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Panics(t, func() { be.Attend(out, q, kc, vc, tc.seqs, tc.sh) })
		})
	}
}

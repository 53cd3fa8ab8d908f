package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"kvlab/kernels"
)

var kv16DTypes = []kernels.KVDType{kernels.KVBF16, kernels.KVF16}

// narrowRef is the rounding WriteKV must do: kernels' scalar conversions.
func narrowRef(f float32, dt kernels.KVDType) uint16 {
	if dt == kernels.KVF16 {
		return kernels.F32ToF16(f)
	}
	return kernels.F32ToBF16(f)
}

// kvTestValues returns n values that exercise the rounding: normal ones at
// several scales, ties, float16's subnormals and overflow, signed zeros,
// infinities and NaN.
func kvTestValues(rng *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519, 65520, -70000, 0x1p-24, 0x1p-25, 3 * 0x1p-26,
		0x1p-14 * 1.5, 1e-30, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), 1 + 0x1p-11, 1 + 3*0x1p-11}
	out := make([]float32, n)
	for i := range out {
		switch {
		case i < len(special):
			out[i] = special[i]
		case i%3 == 0:
			out[i] = float32(rng.NormFloat64()) * 0x1p-20
		default:
			out[i] = float32(rng.NormFloat64() * 4)
		}
	}
	return out
}

// TestWriteKV16 checks WriteKV into a 16-bit cache bit for bit against the
// scalar conversions (round to nearest even; float16's subnormals, overflow
// to Inf, NaN), that skipped rows are not written, that k and v are left
// holding the rounded values (skipped rows too), and ToHost, View and
// CopyBlock on such a cache.
func TestWriteKV16(t *testing.T) {
	for _, dt := range kv16DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			be := NewWithWorkers(2)
			rng := rand.New(rand.NewPCG(1, uint64(dt)))
			const rows, cols = 8, 37
			kc, vc := be.NewKV(rows, cols, dt), be.NewKV(rows, cols, dt)
			if KVDTypeOf(kc) != dt {
				t.Fatalf("KVDTypeOf: %v", KVDTypeOf(kc))
			}
			kd, vd := kvTestValues(rng, 3*cols), kvTestValues(rng, 3*cols)
			k, v := be.FromHost(3, cols, kd), be.FromHost(3, cols, vd)
			slots := []int32{5, -1, 2}
			be.WriteKV(kc, vc, k, v, slots)
			for r, s := range slots {
				for c := range cols {
					i := r*cols + c
					for _, x := range []struct {
						name     string
						cache    *Tensor
						src, out []float32
					}{{"k", kc.(*Tensor), kd, Data(k)}, {"v", vc.(*Tensor), vd, Data(v)}} {
						want := narrowRef(x.src[i], dt)
						if s >= 0 {
							if have := x.cache.kv16[int(s)*cols+c]; have != want {
								t.Fatalf("%s row %d col %d: %v stored as %#04x; want %#04x", x.name, r, c, x.src[i], have, want)
							}
						}
						if back := math.Float32bits(x.out[i]); back != math.Float32bits(dt.Round(x.src[i])) && !math.IsNaN(float64(x.src[i])) {
							t.Fatalf("%s row %d col %d: %v left as %v; want its rounding %v", x.name, r, c, x.src[i], x.out[i], dt.Round(x.src[i]))
						}
					}
				}
			}
			for c := range cols { // row 1 was skipped: slot rows other than 5 and 2 stay zero
				for _, s := range []int{0, 1, 3, 4, 6, 7} {
					if kc.(*Tensor).kv16[s*cols+c] != 0 {
						t.Fatalf("slot %d written", s)
					}
				}
			}
			host := be.ToHost(be.View(kc, 2, 1), make([]float32, cols))
			for c := range cols {
				if want := dt.Round(kd[2*cols+c]); math.Float32bits(host[c]) != math.Float32bits(want) && !math.IsNaN(float64(want)) {
					t.Fatalf("ToHost col %d: %v; want %v", c, host[c], want)
				}
			}
			be.CopyBlock(kc, vc, 2, 0, 1) // block 2 of size 1 is slot 2
			for c := range cols {
				if kc.(*Tensor).kv16[c] != kc.(*Tensor).kv16[2*cols+c] || vc.(*Tensor).kv16[c] != vc.(*Tensor).kv16[2*cols+c] {
					t.Fatalf("CopyBlock col %d", c)
				}
			}
		})
	}
}

// TestAttend16IsF32OverRounded holds attention over a 16-bit cache to
// attention over a float32 cache holding the same rounded keys and values,
// bit for bit, with every kernel set this CPU runs: decodes and prefill
// chunks (attendRow and attendRows, the six-row path and the shared
// blocks), pages of 1 (scattered keys) and of 16 and 64 (eight consecutive
// keys: scoresRows' tiles), head widths with tails, grouped heads,
// windows and the soft cap. A kernel that widened wrongly, or read a
// float32 cache's bytes, would not match.
func TestAttend16IsF32OverRounded(t *testing.T) {
	defer func(k kernelSet) { kern = k }(kern)
	type tcase struct {
		hd, bs, window int
		softCap        float32
	}
	cases := []tcase{{8, 1, 0, 0}, {12, 16, 0, 0}, {48, 4, 0, 0}, {64, 16, 0, 0}, {64, 64, 70, 0}, {128, 16, 0, 1.5}, {80, 16, 5, 0}, {3, 2, 0, 0}}
	specs := []struct{ qlen, ctx int }{{1, 1}, {1, 150}, {7, 140}, {6, 70}, {13, 13}, {1, 65}}
	for _, ks := range runnable {
		for _, dt := range kv16DTypes {
			for _, tc := range cases {
				t.Run(fmt.Sprintf("%s/%v/hd=%d/bs=%d/w=%d/cap=%v", ks.name, dt, tc.hd, tc.bs, tc.window, tc.softCap), func(t *testing.T) {
					kern = *ks
					be := NewWithWorkers(3)
					rng := rand.New(rand.NewPCG(uint64(tc.hd), uint64(tc.bs)))
					sh := kernels.AttnShape{NumHeads: 4, NumKVHeads: 2, HeadDim: tc.hd, BlockSize: tc.bs,
						Scale: float32(1 / math.Sqrt(float64(tc.hd))), Window: tc.window, SoftCap: tc.softCap}
					kvCols := sh.NumKVHeads * tc.hd
					blocks := 0
					for _, s := range specs {
						blocks += (s.ctx + tc.bs - 1) / tc.bs
					}
					perm := rng.Perm(blocks)
					var seqs []kernels.AttnSeq
					nq, next := 0, 0
					for _, s := range specs {
						pages := make([]int32, (s.ctx+tc.bs-1)/tc.bs)
						for i := range pages {
							pages[i] = int32(perm[next])
							next++
						}
						seqs = append(seqs, kernels.AttnSeq{QStart: nq, QLen: s.qlen, CtxLen: s.ctx, Pages: pages})
						nq += s.qlen
					}
					rows := blocks * tc.bs
					kd, vd := make([]float32, rows*kvCols), make([]float32, rows*kvCols)
					for i := range kd {
						kd[i], vd[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
					}
					kr, vr := make([]float32, len(kd)), make([]float32, len(vd))
					for i := range kd {
						kr[i], vr[i] = dt.Round(kd[i]), dt.Round(vd[i])
					}
					slots := make([]int32, rows)
					for i := range slots {
						slots[i] = int32(i)
					}
					kc, vc := be.NewKV(rows, kvCols, dt), be.NewKV(rows, kvCols, dt)
					be.WriteKV(kc, vc, be.FromHost(rows, kvCols, kd), be.FromHost(rows, kvCols, vd), slots)
					q := be.FromHost(nq, sh.NumHeads*tc.hd, randNorm(rng, nq*sh.NumHeads*tc.hd))
					have, want := be.New(nq, q.Cols()), be.New(nq, q.Cols())
					be.Attend(have, q, kc, vc, seqs, sh)
					be.Attend(want, q, be.FromHost(rows, kvCols, kr), be.FromHost(rows, kvCols, vr), seqs, sh)
					for i, w := range Data(want) {
						if math.Float32bits(Data(have)[i]) != math.Float32bits(w) {
							t.Fatalf("out[%d]: %v over the %v cache, %v over its float32 rounding", i, Data(have)[i], dt, w)
						}
					}
				})
			}
		}
	}
}

func randNorm(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// TestKV16KernelsMatchGo checks each kernel set's 16-bit attention kernels
// against the Go ones and against the float32 kernels over the widened
// cache, bit for bit, on scattered rows and every width path.
func TestKV16KernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range kv16DTypes {
		for _, hd := range []int{3, 8, 13, 40, 48, 64, 72, 128} {
			for _, n := range []int{1, 7, 8, 19, 40} {
				const heads = 3
				ld := heads * hd
				cache := make([]uint16, 64*ld)
				wide := make([]float32, len(cache))
				for i := range cache {
					cache[i] = narrowRef(float32(rng.NormFloat64()), dt)
					widenKV(wide[i:i+1], cache[i:i+1], dt)
				}
				rows := make([]int32, n)
				for i := range rows {
					rows[i] = int32(rng.IntN(64))
				}
				q, p := randNorm(rng, hd), make([]float32, n)
				for i := range p {
					p[i] = rng.Float32()
				}
				off := hd
				sWant, aWant := make([]float32, n), make([]float32, hd)
				k32 := kvKernF32(&goKernels)
				scoresRowKV(&k32, sWant, q, wide, off, rows, ld, hd)
				accumulateRowKV(&k32, aWant, p, wide, off, rows, ld, hd)
				for _, ks := range runnable {
					kk := kvKern16(ks, dt)
					sHave, aHave := make([]float32, n), make([]float32, hd)
					scoresRowKV(&kk, sHave, q, cache, off, rows, ld, hd)
					accumulateRowKV(&kk, aHave, p, cache, off, rows, ld, hd)
					for i := range sWant {
						if math.Float32bits(sHave[i]) != math.Float32bits(sWant[i]) {
							t.Fatalf("%v hd=%d keys=%d score %d: %s %g, float32 %g", dt, hd, n, i, ks.name, sHave[i], sWant[i])
						}
					}
					for d := range aWant {
						if math.Float32bits(aHave[d]) != math.Float32bits(aWant[d]) {
							t.Fatalf("%v hd=%d keys=%d acc %d: %s %g, float32 %g", dt, hd, n, d, ks.name, aHave[d], aWant[d])
						}
					}
				}
			}
		}
	}
}

// TestAttendLocal16 checks that a whole-prompt prefill over the k and v
// WriteKV rounded (AttendLocal) gives Attend's bits over the 16-bit cache.
func TestAttendLocal16(t *testing.T) {
	for _, dt := range kv16DTypes {
		be := New()
		rng := rand.New(rand.NewPCG(3, 4))
		const n, bs = 70, 16
		sh := kernels.AttnShape{NumHeads: 4, NumKVHeads: 2, HeadDim: 64, BlockSize: bs, Scale: 0.125}
		kvCols := 2 * 64
		pages := []int32{4, 0, 2, 1, 3}
		slots := make([]int32, n)
		for i := range slots {
			slots[i] = pages[i/bs]*bs + int32(i%bs)
		}
		k, v := be.FromHost(n, kvCols, randNorm(rng, n*kvCols)), be.FromHost(n, kvCols, randNorm(rng, n*kvCols))
		kc, vc := be.NewKV(len(pages)*bs, kvCols, dt), be.NewKV(len(pages)*bs, kvCols, dt)
		be.WriteKV(kc, vc, k, v, slots)
		q := be.FromHost(n, 4*64, randNorm(rng, n*4*64))
		seqs := []kernels.AttnSeq{{QLen: n, CtxLen: n, Pages: pages}}
		local, paged := be.New(n, 4*64), be.New(n, 4*64)
		be.AttendLocal(local, q, k, v, seqs, sh)
		be.Attend(paged, q, kc, vc, seqs, sh)
		for i, w := range Data(paged) {
			if math.Float32bits(Data(local)[i]) != math.Float32bits(w) {
				t.Fatalf("%v out[%d]: local %v, paged %v", dt, i, Data(local)[i], w)
			}
		}
	}
}

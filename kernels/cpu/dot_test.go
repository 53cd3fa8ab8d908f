package cpu

import (
	"fmt"
	"kvlab/kernels"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFMA is a·b+c computed exactly and rounded once to float32.
func exactFMA(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

func TestFmafIsSingleRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	randf := func() float32 {
		// Random sign, mantissa and a wide exponent range (subnormals too).
		m := rng.Uint32() & 0x807fffff
		e := uint32(rng.IntN(254)+1) << 23
		if rng.IntN(8) == 0 {
			e = uint32(rng.IntN(40)+1) << 23
		}
		return math.Float32frombits(m | e)
	}
	check := func(a, b, c float32) {
		t.Helper()
		want := exactFMA(a, b, c)
		if got := fmaf(a, b, c); math.Float32bits(got) != math.Float32bits(want) &&
			!(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
			t.Fatalf("fmaf(%g, %g, %g) = %g (%#08x); want %g (%#08x)",
				a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	// The case plain float64 arithmetic gets wrong: the float64 sum rounds
	// onto a float32 midpoint that the exact sum is not on.
	// (1+2⁻²³)·2⁻²⁴(1−2⁻²³) + (1+2⁻²³) = 1 + 3·2⁻²⁴ − 2⁻⁷⁰: the float64 sum
	// is the tie 1 + 3·2⁻²⁴, which rounds to even (up); the exact value
	// rounds down.
	a, b, c := float32(1+0x1p-23), float32(0x1p-24*(1-0x1p-23)), float32(1+0x1p-23)
	if float32(float64(a)*float64(b)+float64(c)) == exactFMA(a, b, c) {
		t.Fatal("the double-rounding case does not double-round")
	}
	check(a, b, c)
	check(-a, b, -c)
	check(0x1p-24, 1+0x1p-23, 1)
	check(float32(math.SmallestNonzeroFloat32), 0.5, 0)
	for range 200000 {
		a, b, c := randf(), randf(), randf()
		// Keep the product near c often, where cancellation and ties live.
		if rng.IntN(2) == 0 {
			c = -a * b * (1 + float32(rng.IntN(5))*0x1p-23)
		}
		check(a, b, c)
	}
	// Small values near the subnormal boundary.
	for range 100000 {
		a := float32(rng.NormFloat64()) * 0x1p-63
		b := float32(rng.NormFloat64()) * 0x1p-63
		c := float32(rng.NormFloat64()) * 0x1p-126
		check(a, b, c)
	}
}

// TestKernelsMatchGo checks that every kernel set this CPU runs gives the
// same bits as the portable Go kernels, shape by shape, tile by tile and
// for tails, and that bf16 weights give the same bits as their float32
// widening. On a machine without AVX2 (or with the purego tag) only the Go
// kernels run.
func TestKernelsMatchGo(t *testing.T) {
	t.Logf("MatMulT kernels: %s (of %d runnable sets)", kern.name, len(runnable))
	rng := rand.New(rand.NewPCG(5, 6))
	for _, in := range []int{1, 7, 8, 9, 24, 48, 56, 64, 100, 136, 256, 517} {
		// 13 rows: two six-row bands and one row; 8: a band and a pair.
		for _, tc := range []struct {
			rows  int
			scale float32
		}{{13, 1}, {13, 1e-20}, {13, 3e15}, {8, 1}, {8, 3e15}} {
			rows, scale := tc.rows, tc.scale
			t.Run(fmt.Sprintf("in=%d,rows=%d,scale=%g", in, rows, scale), func(t *testing.T) {
				const cols = 21
				x, w := make([]float32, rows*in), make([]float32, cols*in)
				for i := range x {
					x[i] = scale * float32(rng.NormFloat64())
				}
				wh := make([]uint16, cols*in)
				for i := range w {
					wh[i] = kernels.F32ToBF16(float32(rng.NormFloat64()))
					w[i] = widen(wh[i])
				}
				want := make([]float32, rows*cols)
				matMulBlock(&goKernels.f32, want, cols, x, w, in, 0, rows, 0, cols)
				runs := map[string]func(dst []float32){}
				for _, ks := range runnable {
					runs[ks.name+" f32"] = func(dst []float32) { matMulBlock(&ks.f32, dst, cols, x, w, in, 0, rows, 0, cols) }
					runs[ks.name+" bf16"] = func(dst []float32) { matMulBlock(&ks.bf16, dst, cols, x, wh, in, 0, rows, 0, cols) }
					// Without its widest tile, a set tiles 2×8 (if it has
					// that tile), and without both, 3×4.
					pairs, narrow := ks.f32, ks.f32
					pairs.dots6x8 = nil
					narrow.dots6x8, narrow.dots2x8 = nil, nil
					runs[ks.name+" f32 2×8"] = func(dst []float32) { matMulBlock(&pairs, dst, cols, x, w, in, 0, rows, 0, cols) }
					runs[ks.name+" f32 3×4"] = func(dst []float32) { matMulBlock(&narrow, dst, cols, x, w, in, 0, rows, 0, cols) }
					// A single row eight columns at a time instead of in
					// lanes, where the set has lanes.
					rows8, rows8H := ks.f32, ks.bf16
					rows8.rowLanes, rows8H.rowLanes = nil, nil
					runs[ks.name+" f32 1×8"] = func(dst []float32) { matMulBlock(&rows8, dst, cols, x, w, in, 0, rows, 0, cols) }
					runs[ks.name+" bf16 1×8"] = func(dst []float32) { matMulBlock(&rows8H, dst, cols, x, wh, in, 0, rows, 0, cols) }
					pairsH := ks.bf16
					pairsH.dots6x8 = nil
					runs[ks.name+" bf16 2×8"] = func(dst []float32) { matMulBlock(&pairsH, dst, cols, x, wh, in, 0, rows, 0, cols) }
				}
				for name, run := range runs {
					have := make([]float32, rows*cols)
					run(have)
					for i := range want {
						if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
							t.Fatalf("element %d: %s gives %g, go f32 gives %g", i, name, have[i], want[i])
						}
					}
				}
				// And each element is the single dot product of dot.go.
				for r := range rows {
					for c := range cols {
						xr, wr := x[r*in:(r+1)*in], w[c*in:(c+1)*in]
						d := dotTail(dotGo(xr, wr, in/8), xr, wr, in/8*8)
						if math.Float32bits(d) != math.Float32bits(want[r*cols+c]) {
							t.Fatalf("(%d,%d): tile gives %g, lone dot %g", r, c, want[r*cols+c], d)
						}
					}
				}
			})
		}
	}
}

// TestAttnKernelsMatchGo checks the attention kernels of every kernel set
// this CPU runs against the Go ones bit for bit, on scattered rows and head
// widths that exercise every path (64-, 48-, 32-, 16- and 8-wide and scalar
// columns; 8 keys at a time and single keys).
func TestAttnKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, hd := range []int{3, 8, 13, 40, 48, 64, 72, 80, 96, 128} {
		for _, n := range []int{1, 7, 8, 19, 40} {
			t.Run(fmt.Sprintf("hd=%d,keys=%d", hd, n), func(t *testing.T) {
				const heads = 3
				ld := heads * hd
				cache := make([]float32, 64*ld)
				for i := range cache {
					cache[i] = float32(rng.NormFloat64())
				}
				rows := make([]int32, n)
				for i := range rows {
					rows[i] = int32(rng.IntN(64))
				}
				q, p := make([]float32, hd), make([]float32, n)
				for i := range q {
					q[i] = float32(rng.NormFloat64())
				}
				for i := range p {
					p[i] = rng.Float32()
				}
				off := hd // the middle head
				sWant := make([]float32, n)
				scoresRow(&goKernels, sWant, q, cache, off, rows, ld, hd)
				aWant := make([]float32, hd)
				for i := range aWant {
					aWant[i] = float32(i)
				}
				accumulateRow(&goKernels, aWant, p, cache, off, rows, ld, hd)
				for i := range sWant {
					at := int(rows[i])*ld + off
					lone := dotTail(dotGo(q, cache[at:at+hd], hd/8), q, cache[at:at+hd], hd/8*8)
					if math.Float32bits(lone) != math.Float32bits(sWant[i]) {
						t.Fatalf("score %d: go %g, lone dot %g", i, sWant[i], lone)
					}
				}
				for d := range aWant {
					want := float32(d)
					for i, r := range rows {
						want = fmaf(p[i], cache[int(r)*ld+off+d], want)
					}
					if math.Float32bits(want) != math.Float32bits(aWant[d]) {
						t.Fatalf("acc %d: go %g, chain %g", d, aWant[d], want)
					}
				}
				for _, ks := range runnable {
					sHave, aHave := make([]float32, n), make([]float32, hd)
					for i := range aHave {
						aHave[i] = float32(i)
					}
					scoresRow(ks, sHave, q, cache, off, rows, ld, hd)
					accumulateRow(ks, aHave, p, cache, off, rows, ld, hd)
					for i := range sWant {
						if math.Float32bits(sHave[i]) != math.Float32bits(sWant[i]) {
							t.Fatalf("score %d: %s %g, go %g", i, ks.name, sHave[i], sWant[i])
						}
					}
					for d := range aWant {
						if math.Float32bits(aHave[d]) != math.Float32bits(aWant[d]) {
							t.Fatalf("acc %d: %s %g, go %g", d, ks.name, aHave[d], aWant[d])
						}
					}
				}
			})
		}
	}
}

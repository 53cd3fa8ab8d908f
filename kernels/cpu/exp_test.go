package cpu

import (
	"math"
	"slices"
	"testing"
)

// ulps is the distance between a and the float32 nearest to want, in
// units in the last place of float32 at want.
func ulps(a float32, want float64) float64 {
	w := float32(want)
	ulp := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
	return math.Abs(float64(a)-want) / ulp
}

// TestExpNeg bounds expNeg against math.Exp over [-87, 0] (every 1/4096,
// and from -1e-30 to -1 in steps of 0.05 %): at most 2 units in the last place; below
// expLo it is a constant under 2^-125.
func TestExpNeg(t *testing.T) {
	worst := 0.0
	check := func(x float32) {
		u := ulps(expNeg(x), math.Exp(float64(x)))
		worst = max(worst, u)
		if u > 2 {
			t.Fatalf("expNeg(%v) = %v; math.Exp %v (%.2f ulp)", x, expNeg(x), math.Exp(float64(x)), u)
		}
	}
	for i := 0; i <= 87*4096; i++ {
		check(-float32(i) / 4096)
	}
	check(0)
	for x := float32(-1e-30); x > -1; x *= 1.0005 {
		check(x)
	}
	t.Logf("worst error: %.3f ulp", worst)
	for _, x := range []float32{-88, -100, -1e30, float32(math.Inf(-1))} {
		if e := expNeg(x); e < 0 || e > 1.0/(1<<125) {
			t.Errorf("expNeg(%v) = %v", x, e)
		}
	}
}

// TestExpShiftKernelsMatchGo checks that every kernel set's expShift gives
// expNeg's bits, across lengths that leave tails of every size.
func TestExpShiftKernelsMatchGo(t *testing.T) {
	for n := range 70 {
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(math.Sin(float64(i*7+n))) * 40
		}
		const m = 40
		for _, ks := range runnable {
			x := append([]float32(nil), in...)
			ks.attn.expShift(x, m)
			for i := range x {
				if want := expNeg(in[i] - m); math.Float32bits(x[i]) != math.Float32bits(want) {
					t.Fatalf("%s: n=%d, x[%d]: %v; want %v", ks.name, n, i, x[i], want)
				}
			}
		}
	}
}

// TestSiLUMulKernelsMatchGo checks that every kernel set's siluMul gives
// siluMulGo's bits, across lengths that leave tails of every size and on
// both signs of zero and the far tails, and that siluMulGo is within a few
// ulp of silu(g)·u computed in float64.
func TestSiLUMulKernelsMatchGo(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 88, -88, 100, -100, 1e30, -1e30}
	worst := checkGateMul(t, "silu", siluMulGo, func(ks *kernelSet) func(dst, g, u []float32) { return ks.siluMul }, 20, special,
		func(have, g, u float32) float64 {
			exact := float64(g) / (1 + math.Exp(-float64(g))) * float64(u)
			if math.Abs(exact) <= 1e-30 {
				if math.Abs(float64(have)) > 1e-30 {
					t.Fatalf("silu(%v)·%v = %v; want %v", g, u, have, exact)
				}
				return 0
			}
			return ulps(have, exact)
		})
	t.Logf("worst error: %.3g ulp", worst)
	if worst > 6 {
		t.Errorf("worst error %.3g ulp; want at most 6", worst)
	}
}

// checkGateMul checks a gated product's kernels, the one pick takes from
// each kernel set, against goK bit for bit, over lengths 0..69 of gates of
// up to ±scale with special values mixed in, and returns the worst of
// errOf (the Go result's error against an exact formula) over them.
func checkGateMul(t *testing.T, name string, goK func(dst, g, u []float32), pick func(*kernelSet) func(dst, g, u []float32),
	scale float32, special []float32, errOf func(have, g, u float32) float64) float64 {
	t.Helper()
	worst := 0.0
	for n := range 70 {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i] = float32(math.Sin(float64(i*7+n))) * scale
			u[i] = float32(math.Cos(float64(i*3+n))) * 2
			if i%5 == 4 {
				g[i] = special[(i+n)%len(special)]
			}
		}
		want := make([]float32, n)
		goK(want, g, u)
		for i := range want {
			worst = max(worst, errOf(want[i], g[i], u[i]))
		}
		for _, ks := range runnable {
			have := make([]float32, n)
			pick(ks)(have, g, u)
			inPlace := slices.Clone(g) // dst may be gate
			pick(ks)(inPlace, inPlace, u)
			for i := range have {
				if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s: n=%d, %s(%v)·%v = %v; want %v", ks.name, n, name, g[i], u[i], have[i], want[i])
				}
				if math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s: n=%d, in place, %s(%v)·%v = %v; want %v", ks.name, n, name, g[i], u[i], inPlace[i], want[i])
				}
			}
		}
	}
	return worst
}

// TestScaleMaxKernelsMatchGo checks every kernel set's scaleMax against
// scaleMaxGo: the same products bit for bit and the same maximum, across
// lengths that leave tails of every size.
func TestScaleMaxKernelsMatchGo(t *testing.T) {
	for n := range 70 {
		in := make([]float32, n)
		for i := range in {
			in[i] = float32(math.Sin(float64(i*5+n))) * 30
		}
		want := append([]float32(nil), in...)
		wantMax := scaleMaxGo(want, 0.125)
		for _, ks := range runnable {
			x := append([]float32(nil), in...)
			if m := ks.attn.scaleMax(x, 0.125); m != wantMax {
				t.Fatalf("%s: n=%d: max %v; want %v", ks.name, n, m, wantMax)
			}
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s: n=%d, x[%d]: %v; want %v", ks.name, n, i, x[i], want[i])
				}
			}
		}
	}
}

// BenchmarkExpShiftBlock times attention's exponential over one block of
// attnBlock scores, the length softmaxStep hands it, in every kernel set
// this machine runs: at this length the cost of entering the kernel
// (loading its constants) shows beside the arithmetic.
// TestAMD64AssemblyIsAllVEX keeps that entry cheap on Intel cores.
func BenchmarkExpShiftBlock(b *testing.B) {
	for _, ks := range runnable {
		b.Run(ks.name, func(b *testing.B) {
			x := make([]float32, attnBlock)
			for i := range x {
				x[i] = -float32(i%7) * 0.3
			}
			for b.Loop() {
				ks.attn.expShift(x, 0)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*attnBlock), "ns/score")
		})
	}
}

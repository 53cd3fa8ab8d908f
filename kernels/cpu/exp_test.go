package cpu

import (
	"math"
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
		for _, ks := range []*kernelSet{&goKernels, &avx2Kernels, &kern} {
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

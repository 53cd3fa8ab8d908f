//go:build amd64 && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBF16DotInstruction checks, on this CPU, that VDPBF16PS is dpStep lane
// for lane and VCVTNEPS2BF16 is roundBF16, over random bits (NaNs,
// infinities and subnormals among them) and values of every scale: the
// flushing and the order within a pair are the definition's, and a CPU
// that did either differently would fail here first.
func TestBF16DotInstruction(t *testing.T) {
	if !hasAVX512BF16() {
		t.Skip("no AVX512-BF16 on this CPU")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	bf := func() uint16 {
		switch rng.IntN(6) {
		case 0:
			return uint16(rng.Uint32())
		case 1:
			return uint16(rng.IntN(0x100)) | uint16(rng.IntN(2))<<15 // zero or subnormal
		}
		return roundBF16(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(60)-30)))
	}
	f32 := func() float32 {
		switch rng.IntN(5) {
		case 0:
			return math.Float32frombits(rng.Uint32())
		case 1:
			return math.Float32frombits(rng.Uint32() & 0x807fffff) // zero or subnormal
		}
		return float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(80)-40))
	}
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	}
	for it := range 200000 {
		var acc, have [16]float32
		var x [32]uint16
		var w [16]uint16
		for i := range acc {
			acc[i] = f32()
		}
		for i := range x {
			x[i] = bf()
		}
		for i := range w {
			w[i] = bf()
		}
		have = acc
		vdpbf16psProbe(&have[0], &x[0], &w[0])
		for l := range 16 {
			p := l % 8 // both halves take the same sixteen weights
			want := dpStep(dpStep(acc[l], x[2*l+1], w[2*p+1]), x[2*l], w[2*p])
			if !same(have[l], want) {
				t.Fatalf("iteration %d lane %d: %08x + %04x·%04x + %04x·%04x: have %08x; want %08x", it, l,
					math.Float32bits(acc[l]), x[2*l+1], w[2*p+1], x[2*l], w[2*p], math.Float32bits(have[l]), math.Float32bits(want))
			}
		}
		var src [16]float32
		var got [16]uint16
		for i := range src {
			src[i] = f32()
		}
		toBF16AVX512(&got[0], &src[0], 1)
		for i := range src {
			if want := roundBF16(src[i]); got[i] != want {
				t.Fatalf("iteration %d: VCVTNEPS2BF16(%08x): have %04x; want %04x", it, math.Float32bits(src[i]), got[i], want)
			}
		}
	}
}

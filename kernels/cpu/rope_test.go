package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRopeKernelsMatchGo checks every runnable set's rope against ropeGo
// bit for bit, at head widths the vector kernels take (half a multiple of
// 8) and ones they hand to Go, on rows of one to three heads.
func TestRopeKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, hd := range []int{8, 16, 32, 48, 64, 128, 256} {
		for heads := 1; heads <= 3; heads++ {
			row := randNorm(rng, heads*hd)
			cs := make([]float32, hd)
			for i := range hd / 2 {
				a := rng.Float64() * 2 * math.Pi
				cs[i], cs[hd/2+i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			want := slices.Clone(row)
			ropeGo(want, cs, hd)
			for _, ks := range runnable {
				have := slices.Clone(row)
				ks.rope(have, cs, hd)
				for i := range want {
					if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s hd=%d heads=%d [%d]: %v, ropeGo %v", ks.name, hd, heads, i, have[i], want[i])
					}
				}
			}
		}
	}
}

// TestRoPETablesAreNeverStale runs a backend's RoPE through calls that hit
// and miss its kept tables (the same positions again, other positions of
// the same length, one position changed, other frequencies, two frequency
// sets alternating as Gemma-3's layers do) and checks each result against
// a fresh backend's, which has no table to reuse.
func TestRoPETablesAreNeverStale(t *testing.T) {
	const hd, heads = 64, 2
	freqs := func(base float64) []float32 {
		f := make([]float32, hd/2)
		for i := range f {
			f[i] = float32(math.Pow(base, -float64(2*i)/hd))
		}
		return f
	}
	global, local := freqs(1e6), freqs(1e4)
	posA := []int32{5, 6, 7, 8, 9}
	posB := []int32{105, 106, 107, 108, 109}
	posA2 := []int32{5, 6, 7, 8, 10}
	calls := []struct {
		pos  []int32
		freq []float32
	}{
		{posA, global}, {posA, global}, {posB, global}, {posA2, global},
		{posA2, local}, {posA2, global}, {posA2, local}, {posA, local}, {posA[:3], local},
	}
	rng := rand.New(rand.NewPCG(9, 10))
	be := NewWithWorkers(2)
	for i, c := range calls {
		x := randNorm(rng, len(c.pos)*heads*hd)
		have := be.FromHost(len(c.pos), heads*hd, x)
		be.RoPE(have, c.pos, hd, c.freq)
		fresh := NewWithWorkers(2)
		want := fresh.FromHost(len(c.pos), heads*hd, x)
		fresh.RoPE(want, c.pos, hd, c.freq)
		if !slices.Equal(asCPU(have).Data, asCPU(want).Data) {
			t.Fatalf("call %d (positions %v): rotated differently from a backend with no kept table", i, c.pos)
		}
	}
}

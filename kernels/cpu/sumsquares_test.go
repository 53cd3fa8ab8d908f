package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sumSquaresByDefinition is sumSquares' order written as its doc states
// it: lane sums over whole groups of eight, the tree, then the tail.
func sumSquaresByDefinition(x []float32) float64 {
	var lane [8]float64
	n := len(x) / 8 * 8
	for i, v := range x[:n] {
		lane[i%8] += float64(v) * float64(v)
	}
	s := ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]))
	for _, v := range x[n:] {
		s += float64(v) * float64(v)
	}
	return s
}

// TestSumSquaresFollowsItsOrder checks sumSquaresGo and every runnable
// set's sumSquares against the stated order bit for bit, at every tail
// length, on rows whose magnitudes span enough that a different order
// (one running sum, as rmsNorm once had) rounds differently, and that
// such rows occur, so the check can fail.
func TestSumSquaresFollowsItsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	orderMatters := 0
	for n := range 80 {
		for range 20 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20)))
			}
			want := sumSquaresByDefinition(x)
			have := sumSquaresGo(x)
			if math.Float64bits(have) != math.Float64bits(want) {
				t.Fatalf("n=%d: sumSquaresGo %v, its order gives %v", n, have, want)
			}
			for _, ks := range runnable {
				if s := ks.sumSquares(x); math.Float64bits(s) != math.Float64bits(want) {
					t.Fatalf("%s n=%d: sumSquares %v, its order gives %v", ks.name, n, s, want)
				}
			}
			var seq float64
			for _, v := range x {
				seq += float64(v) * float64(v)
			}
			if seq != have {
				orderMatters++
			}
		}
	}
	if orderMatters == 0 {
		t.Fatal("no row where the order of the sum changes a bit: the test cannot tell orders apart")
	}
}

// TestNormScaleKernelsMatchGo checks every runnable set's normScale
// against normScaleGo bit for bit, at every tail length, into another
// row and in place (RMSNormHeads normalises in place).
func TestNormScaleKernelsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := range 40 {
		x, w := randNorm(rng, n), randNorm(rng, n)
		s := float32(rng.Float64()*3 + 0.1)
		want := make([]float32, n)
		normScaleGo(want, x, w, s)
		for _, ks := range runnable {
			have := make([]float32, n)
			ks.normScale(have, x, w, s)
			inPlace := append([]float32(nil), x...)
			ks.normScale(inPlace, inPlace, w, s)
			for i := range want {
				if math.Float32bits(have[i]) != math.Float32bits(want[i]) || math.Float32bits(inPlace[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d [%d]: %v and %v in place, want %v", ks.name, n, i, have[i], inPlace[i], want[i])
				}
			}
		}
	}
}

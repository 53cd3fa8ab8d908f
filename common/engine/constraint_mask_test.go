package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowMaskAgreesWithPlain: the one-pass masking by words gives the
// plain copy-bias-mask-scan row, bit for bit, and the same verdict on
// whether anything is left, on random rows (with -Inf, +Inf, NaN and
// logits a bias pushes past float32), masks of every kind of word
// (all ones, zeros, mixed, a last word cut short), biases (on refused,
// allowed and end-of-sequence tokens, repeated, out of range, -Inf) and
// end-of-sequence settings. Both verdicts must occur, or the test would
// not see a dead end.
func TestRowMaskAgreesWithPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	inf := float32(math.Inf(1))
	dead, live := 0, 0
	for trial := range 4000 {
		n := 1 + rng.IntN(300)
		row := make([]float32, n)
		for i := range row {
			switch rng.IntN(40) {
			case 0:
				row[i] = -inf
			case 1:
				row[i] = inf
			case 2:
				row[i] = float32(math.NaN())
			case 3:
				row[i] = 3e38
			default:
				row[i] = float32(rng.NormFloat64())
			}
			if trial%4 == 0 && rng.IntN(3) != 0 {
				row[i] = -inf // mostly dead rows, so dead ends happen
			}
		}
		bits := make([]uint64, (n+63)/64)
		for w := range bits {
			switch rng.IntN(5) {
			case 0:
				bits[w] = math.MaxUint64
			case 1:
			case 2:
				bits[w] = rng.Uint64()
			case 3:
				bits[w] = ^(1 << rng.IntN(64)) // one refused
			default:
				bits[w] = 1 << rng.IntN(64) // one allowed
			}
		}
		var bias []Bias
		for range rng.IntN(6) {
			b := Bias{ID: int32(rng.IntN(n + 3)), Bias: float32(rng.NormFloat64() * 5)}
			switch rng.IntN(6) {
			case 0:
				b.Bias = -inf
			case 1:
				b.Bias = 3e38
			}
			bias = append(bias, b)
			if rng.IntN(4) == 0 {
				bias = append(bias, b) // the same token twice
			}
		}
		eos := map[int32]bool{}
		for range rng.IntN(3) {
			eos[int32(rng.IntN(n+2))] = true
		}
		m := rowMask{bits: bits, bias: bias, eos: eos, canEnd: rng.IntN(2) == 0, ignoreEOS: rng.IntN(3) == 0}
		want, got := make([]float32, n), make([]float32, n)
		for i := range got {
			got[i] = float32(rng.NormFloat64()) // apply must write every logit
		}
		_, wantLive := m.applyPlain(want, row, nil)
		_, gotLive := m.apply(got, row, nil)
		if gotLive != wantLive {
			t.Fatalf("trial %d: live %v, plain %v", trial, gotLive, wantLive)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("trial %d: logit %d is %v, plain %v", trial, i, got[i], want[i])
			}
		}
		if wantLive {
			live++
		} else {
			dead++
		}
	}
	if dead < 100 || live < 100 {
		t.Fatalf("%d dead and %d live rows: the test does not see both", dead, live)
	}
}

// BenchmarkRowMask is the masking of one 262144-token row alone, plain
// and in one pass, with a mask like a JSON string's (nearly all allowed)
// and a number's (nearly none).
func BenchmarkRowMask(b *testing.B) {
	const n = 262144
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, n)
	for i := range row {
		row[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, n)
	for _, c := range []struct {
		name string
		p    float64 // chance a token is allowed
	}{{"string", 0.95}, {"number", 0.005}} {
		bits := make([]uint64, n/64)
		for i := range n {
			if rng.Float64() < c.p {
				bits[i/64] |= 1 << (i % 64)
			}
		}
		// A string's refused tokens cluster (those with a quote), so many
		// words are all ones; a number's allowed ones cluster too.
		for w := range bits {
			if c.p > 0.5 && rng.IntN(10) != 0 {
				bits[w] = math.MaxUint64
			}
			if c.p < 0.5 && rng.IntN(10) != 0 {
				bits[w] = 0
			}
		}
		m := rowMask{bits: bits, eos: map[int32]bool{n - 1: true}, canEnd: true}
		b.Run(c.name+"/plain", func(b *testing.B) {
			for b.Loop() {
				m.applyPlain(out, row, nil)
			}
		})
		b.Run(c.name+"/words", func(b *testing.B) {
			for b.Loop() {
				m.apply(out, row, nil)
			}
		})
	}
}

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// TestKernelSet checks that KernelSet names the set MatMulT runs, the last
// of runnable, and, where KVLAB_KERNEL_SET names the set a run expects
// (make test-arm64 sets it to neon), that this build runs that set: a
// build that fell back to the Go kernels would otherwise pass every
// comparison with itself.
func TestKernelSet(t *testing.T) {
	if KernelSet() != kern.name || runnable[len(runnable)-1].name != kern.name {
		t.Fatalf("KernelSet %q, kern %q, last runnable %q", KernelSet(), kern.name, runnable[len(runnable)-1].name)
	}
	t.Logf("kernel set: %s (of %d runnable)", KernelSet(), len(runnable))
	if want := os.Getenv("KVLAB_KERNEL_SET"); want != "" && KernelSet() != want {
		t.Fatalf("this build runs the %q kernels; KVLAB_KERNEL_SET wants %q", KernelSet(), want)
	}
}

// TestAxpyRows6MatchesChains checks every six-row axpy kernel a runnable
// set has (float32, bf16 and float16 caches) against the chain of fused
// multiply-adds each accumulator element is defined to be, bit for bit, at
// every width it takes and on scattered rows.
func TestAxpyRows6MatchesChains(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const ld, off, step = 3 * 64, 64, 70
	for _, n := range []int{0, 1, 5, 64} {
		for _, width := range []int{16, 32, 64} {
			rows := make([]int32, n)
			for i := range rows {
				rows[i] = int32(rng.IntN(40))
			}
			p := randNorm(rng, 6*attnBlock)
			acc0 := randNorm(rng, 5*step+width)
			cache32 := randNorm(rng, 40*ld)
			want := func(v func(i int) float32) []float32 {
				acc := slices.Clone(acc0)
				for r := range 6 {
					for d := range width {
						for i, kr := range rows {
							acc[r*step+d] = fmaf(p[r*attnBlock+i], v(int(kr)*ld+off+d), acc[r*step+d])
						}
					}
				}
				return acc
			}
			check := func(name string, have, want []float32) {
				t.Helper()
				for i := range want {
					if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s n=%d width=%d acc[%d]: %g, chain %g", name, n, width, i, have[i], want[i])
					}
				}
			}
			want32 := want(func(i int) float32 { return cache32[i] })
			for _, ks := range runnable {
				if ks.attn.axpyRows6 != nil {
					have := slices.Clone(acc0)
					ks.attn.axpyRows6(have, step, p, cache32, off, rows, ld, width)
					check(ks.name+" f32", have, want32)
				}
			}
			for _, dt := range kv16DTypes {
				cache := make([]uint16, len(cache32))
				wide := make([]float32, len(cache))
				for i := range cache {
					cache[i] = narrowRef(cache32[i], dt)
					widenKV(wide[i:i+1], cache[i:i+1], dt)
				}
				want16 := want(func(i int) float32 { return wide[i] })
				for _, ks := range runnable {
					if kk := kvKern16(ks, dt); kk.axpyRows6 != nil {
						have := slices.Clone(acc0)
						kk.axpyRows6(have, step, p, cache, off, rows, ld, width)
						check(fmt.Sprintf("%s %v", ks.name, dt), have, want16)
					}
				}
			}
		}
	}
}

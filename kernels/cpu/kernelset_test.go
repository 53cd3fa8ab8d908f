package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestKernelSet checks that KernelSet names the set MatMulT runs and,
// where KVLAB_KERNEL_SET names a set (make test-arm64 sets it to neon;
// TestKernelSetEnvSelects sets each runnable one), that this process runs
// that set, otherwise the fastest, the last of runnable that is not
// opt-in (amx): a build that fell back to the Go kernels would otherwise
// pass every comparison with itself.
func TestKernelSet(t *testing.T) {
	want := os.Getenv(kernelSetEnv)
	last := defaultKernelSet(runnable)
	if want == "" {
		want = last.name
	}
	if KernelSet() != kern.name || KernelSet() != want {
		t.Fatalf("KernelSet %q, kern %q; want %q (%s=%q, default %q)",
			KernelSet(), kern.name, want, kernelSetEnv, os.Getenv(kernelSetEnv), last.name)
	}
	t.Logf("kernel set: %s (of %d runnable)", KernelSet(), len(runnable))
}

// TestChooseKernelSet checks the choice KVLAB_KERNEL_SET makes: empty is
// the fastest runnable set that is not opt-in, a runnable name is that set, and a set the CPU
// cannot run or an unknown name is an error naming the runnable sets.
func TestChooseKernelSet(t *testing.T) {
	goOnly := []*kernelSet{&goKernels}
	avx2 := kernelSet{name: "avx2"}
	both := []*kernelSet{&goKernels, &avx2}
	amx := kernelSet{name: "amx", optIn: true}
	withAMX := []*kernelSet{&goKernels, &avx2, &amx}
	for _, c := range []struct {
		sets []*kernelSet
		want string
		ks   *kernelSet
		err  string
	}{
		{both, "", &avx2, ""},
		{withAMX, "", &avx2, ""},
		{withAMX, "amx", &amx, ""},
		{both, "avx2", &avx2, ""},
		{both, "go", &goKernels, ""},
		{goOnly, "", &goKernels, ""},
		{both, "avx512", nil, "KVLAB_KERNEL_SET=avx512: this CPU cannot run the avx512 kernels; this CPU runs go, avx2"},
		{goOnly, "neon", nil, "cannot run the neon kernels; this CPU runs go (unset KVLAB_KERNEL_SET for the default, go)"},
		{both, "AVX2", nil, `KVLAB_KERNEL_SET="AVX2" is not a kernel set (the sets are amx, avx512, avx2, neon, go); this CPU runs go, avx2`},
		{both, "sse", nil, "is not a kernel set"},
	} {
		ks, err := chooseKernelSet(c.sets, c.want)
		switch {
		case c.err == "" && (err != nil || ks != c.ks):
			t.Errorf("%q: %v, %v; want the %s set", c.want, ks, err, c.ks.name)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v; want one containing %q", c.want, err, c.err)
		}
	}
}

// TestKernelSetEnvSelects runs this test binary again with
// KVLAB_KERNEL_SET set to each set this CPU runs, and checks that the
// child runs that set (its TestKernelSet passes and logs the name); then
// with a set it cannot run and an unknown name, and checks that the child
// fails at start-up with a message naming the runnable sets.
func TestKernelSetEnvSelects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary again (not under make test-arm64's emulator)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := func(set string) (string, error) {
		cmd := exec.Command(exe, "-test.run", "^TestKernelSet$", "-test.v", "-test.count", "1")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, kernelSetEnv+"=")
		}), kernelSetEnv+"="+set)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var names []string
	for _, ks := range runnable {
		names = append(names, ks.name)
		out, err := child(ks.name)
		if err != nil || !strings.Contains(out, "kernel set: "+ks.name+" ") {
			t.Errorf("%s=%s: %v\n%s", kernelSetEnv, ks.name, err, out)
		}
	}
	runs := "this CPU runs " + strings.Join(names, ", ")
	for _, set := range kernelSetNames {
		if slices.Contains(names, set) {
			continue
		}
		out, err := child(set)
		if err == nil || !strings.Contains(out, "cannot run the "+set+" kernels; "+runs) {
			t.Errorf("%s=%s (not runnable here): want a failure naming the runnable sets, have %v\n%s", kernelSetEnv, set, err, out)
		}
	}
	out, err := child("avx")
	if err == nil || !strings.Contains(out, `"avx" is not a kernel set`) || !strings.Contains(out, runs) {
		t.Errorf("%s=avx: want a failure naming the runnable sets, have %v\n%s", kernelSetEnv, err, out)
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

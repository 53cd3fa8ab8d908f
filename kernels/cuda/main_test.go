//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// The tests compare every kernel with the CPU backend, the reference, on
// the same random inputs. They need a GPU (or the cudaemu build); on a
// machine without one, New's error is printed once and every GPU test is
// skipped, while the tests of the no-GPU path itself still run.
//
// A run that skips every GPU test still reports PASS, which on a GPU
// machine would hide a driver that failed to start. With
// KVLAB_REQUIRE_GPU=1 in the environment, a failing New fails the whole
// run instead: every script that runs these tests on hardware sets it.

// gpu is the backend under test, nil when New failed with gpuErr.
var (
	gpu    *Backend
	gpuErr error
)

// ref is the reference every result is compared with.
var ref = cpu.New()

// requireGPUEnv names the switch that turns "no GPU" from a skip into a
// failure.
const requireGPUEnv = "KVLAB_REQUIRE_GPU"

// startupFailure returns the message TestMain fails with when New returned
// err and the environment variable requireGPUEnv holds env, or "" when the
// run may go on (with the GPU tests skipped if err is not nil).
func startupFailure(err error, env string) string {
	if err == nil || env != "1" {
		return ""
	}
	return fmt.Sprintf("cuda tests: FAIL: %s=1 and New failed: %v", requireGPUEnv, err)
}

func TestMain(m *testing.M) {
	be, err := New()
	if msg := startupFailure(err, os.Getenv(requireGPUEnv)); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
	if err != nil {
		gpuErr = err
		fmt.Fprintf(os.Stderr, "cuda tests: GPU tests skipped: %v (set %s=1 to fail instead)\n", err, requireGPUEnv)
	} else {
		gpu = be.(*Backend)
		fmt.Fprintf(os.Stderr, "cuda tests: running on %s\n", gpu.Describe())
	}
	code := m.Run()
	printErrReport(os.Stdout)
	os.Exit(code)
}

// needGPU skips tb without a usable device.
func needGPU(tb testing.TB) *Backend {
	tb.Helper()
	if gpu == nil {
		tb.Skip("no usable GPU (New's error is printed at the start of the run)")
	}
	return gpu
}

// TestNewWithoutDevice checks the path a GPU-less machine takes: the process
// got this far (gorgonia.org/cu's init did not exit it) and New returned an
// error that wraps ErrNoDevice and says what the driver reported.
func TestNewWithoutDevice(t *testing.T) {
	if gpu != nil {
		t.Skipf("a GPU is present (%s)", gpu.Describe())
	}
	if !errors.Is(gpuErr, ErrNoDevice) && !strings.Contains(gpuErr.Error(), "compute capability") {
		t.Fatalf("New: %v; want an error wrapping ErrNoDevice", gpuErr)
	}
	if !strings.HasPrefix(gpuErr.Error(), "cuda: ") {
		t.Errorf("New's error %q does not say where it comes from", gpuErr)
	}
}

// TestRequireGPU checks the decision TestMain takes at startup: only a
// failed New under KVLAB_REQUIRE_GPU=1 ends the run.
func TestRequireGPU(t *testing.T) {
	noDev := fmt.Errorf("%w: the driver lists no device", ErrNoDevice)
	cases := []struct {
		name string
		err  error
		env  string
		fail bool
	}{
		{"device, switch off", nil, "", false},
		{"device, switch on", nil, "1", false},
		{"no device, switch off", noDev, "", false},
		{"no device, switch on", noDev, "1", true},
		{"no device, other value", noDev, "yes", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := startupFailure(c.err, c.env)
			if !c.fail {
				assert.Empty(t, msg)
				return
			}
			assert.Contains(t, msg, "FAIL")
			assert.Contains(t, msg, requireGPUEnv)
			assert.Contains(t, msg, "no device")
		})
	}
}

// TestKernelTableMatchesPTX checks, without a GPU, that the kernels the
// backend looks up are exactly the entry points the embedded PTX defines.
func TestKernelTableMatchesPTX(t *testing.T) {
	var f functions
	entry := regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(`)
	files, err := ptxFiles.ReadDir("ptx")
	if err != nil {
		t.Fatal(err)
	}
	table := f.entries()
	if len(files) != len(table) {
		t.Errorf("%d embedded PTX files for %d modules in the kernel table", len(files), len(table))
	}
	for _, de := range files {
		mod := strings.TrimSuffix(de.Name(), ".ptx")
		data, err := ptxFiles.ReadFile("ptx/" + de.Name())
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for _, m := range entry.FindAllSubmatch(data, -1) {
			have = append(have, string(m[1]))
		}
		have, want := sortedStrings(have), sortedKeys(table[mod])
		if strings.Join(have, ",") != strings.Join(want, ",") {
			t.Errorf("%s defines %v; the backend launches %v", de.Name(), have, want)
		}
	}
}

func sortedStrings(s []string) []string {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return sortedKeys(m)
}

// newRand returns a deterministic generator so that a failure reproduces.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// randFloats returns n values uniform in [-scale, scale).
func randFloats(rng *rand.Rand, n int, scale float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = scale * (2*rng.Float32() - 1)
	}
	return out
}

// pair holds the same host data on both backends.
type pair struct {
	host     []float32
	g, c     kernels.Tensor
	rows, cs int
}

// newPair uploads data (rows×cols) to the GPU and the CPU backend.
func newPair(be *Backend, rows, cols int, data []float32) *pair {
	return &pair{
		host: data, rows: rows, cs: cols,
		g: be.FromHost(rows, cols, data),
		c: ref.FromHost(rows, cols, data),
	}
}

// randPair is newPair with values uniform in [-1, 1).
func randPair(be *Backend, rng *rand.Rand, rows, cols int) *pair {
	return newPair(be, rows, cols, randFloats(rng, rows*cols, 1))
}

func (p *pair) free(be *Backend) { be.Free(p.g) }

// gpuData and cpuData read both sides back.
func (p *pair) gpuData(be *Backend) []float32 { return be.ToHost(p.g, make([]float32, p.rows*p.cs)) }
func (p *pair) cpuData() []float32            { return cpu.Data(p.c) }

// requireClose fails unless |have-want| <= tol·max(1, |want|) everywhere:
// relative for large values, absolute below 1.
func requireClose(t *testing.T, have, want []float32, tol float64, what string) {
	t.Helper()
	if len(have) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(have), len(want))
	}
	recordErr(what, len(want), scaledErr(have, want), tol, "relative above 1, absolute below")
	bad := 0
	for i := range want {
		d := math.Abs(float64(have[i]) - float64(want[i]))
		if !(d <= tol*math.Max(1, math.Abs(float64(want[i])))) { // also catches NaN
			if bad < 5 {
				t.Errorf("%s[%d]: gpu %v, cpu %v (diff %.3g, tolerance %.1g)", what, i, have[i], want[i], d, tol)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d values out of tolerance", what, bad, len(want))
	}
}

// requireEqual fails unless have and want hold the same bits.
func requireEqual(t *testing.T, have, want []float32, what string) {
	t.Helper()
	if len(have) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(have), len(want))
	}
	recordErr(what, len(want), scaledErr(have, want), 0, "bits")
	for i := range want {
		if math.Float32bits(have[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d]: gpu %v, cpu %v", what, i, have[i], want[i])
		}
	}
}

// requirePanics fails unless f panics.
func requirePanics(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

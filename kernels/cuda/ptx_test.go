package cuda

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestPTXMatchesSources fails when the committed PTX is stale: `make kernels`
// records in ptx/SOURCES.sha256 the nvcc flags it used and a SHA-256 of
// every input (src/*.cu, src/*.cuh) and of every .ptx it wrote; this test recomputes
// the hashes and reads the flags Makefile.inc would use now. It runs in the
// default build, with no GPU and no nvcc, so CI catches a kernel edited
// without regenerating.
func TestPTXMatchesSources(t *testing.T) {
	if _, err := os.Stat(filepath.Join("src", "attention.cu")); err != nil {
		// A test binary copied to a GPU machine runs without the sources.
		t.Skip("not run from the source directory")
	}
	recorded, flags := readSums(t, filepath.Join("ptx", "SOURCES.sha256"))
	if want := makefileFlags(t); flags != want {
		t.Errorf("the PTX was generated with nvcc flags %q, Makefile.inc now says %q; run `make kernels`", flags, want)
	}

	var want []string
	for _, pattern := range []string{filepath.Join("src", "*.cu"), filepath.Join("src", "*.cuh"), filepath.Join("ptx", "*.ptx")} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m...)
	}
	slices.Sort(want)

	var have []string
	for name := range recorded {
		have = append(have, name)
	}
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Fatalf("ptx/SOURCES.sha256 lists %v but the directory holds %v; run `make kernels`", have, want)
	}
	for _, name := range want {
		data, err := os.ReadFile(filepath.FromSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != recorded[name] {
			t.Errorf("%s changed since the PTX was generated (sha256 %s, recorded %s); run `make kernels`",
				name, got[:12], recorded[name][:min(12, len(recorded[name]))])
		}
	}

	// Every source has its PTX, and the PTX targets what the backend checks
	// for at start-up (compute capability 8.0).
	for _, src := range want {
		if filepath.Ext(src) != ".cu" {
			continue
		}
		ptx := filepath.Join("ptx", strings.TrimSuffix(filepath.Base(src), ".cu")+".ptx")
		data, err := os.ReadFile(ptx)
		if err != nil {
			t.Errorf("%s has no PTX: %v", src, err)
			continue
		}
		if !regexp.MustCompile(`(?m)^\.target sm_80$`).Match(data) {
			t.Errorf("%s does not target sm_80", ptx)
		}
		if !regexp.MustCompile(`(?m)^\.visible \.entry \w+\(`).Match(data) {
			t.Errorf("%s defines no kernel", ptx)
		}
	}
}

// readSums parses sha256sum output ("<hex>  <name>" lines) into name → hex
// digest, and returns the flags of the "# flags: " comment line.
func readSums(t *testing.T, path string) (map[string]string, string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v; run `make kernels`", err)
	}
	defer f.Close()
	sums, flags := map[string]string{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# flags: "); ok {
			flags = strings.TrimSpace(rest)
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		sums[filepath.ToSlash(name)] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums, flags
}

// makefileFlags returns NVCCFLAGS as Makefile.inc defines it, with the
// $(VAR) references to other variables of the file expanded.
func makefileFlags(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("Makefile.inc")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	assign := regexp.MustCompile(`(?m)^([A-Z_]+)\s*[?:]?=\s*(.*)$`)
	for _, m := range assign.FindAllStringSubmatch(string(data), -1) {
		vars[m[1]] = strings.TrimSpace(m[2])
	}
	flags, ok := vars["NVCCFLAGS"]
	if !ok {
		t.Fatal("Makefile.inc defines no NVCCFLAGS")
	}
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	return ref.ReplaceAllStringFunc(flags, func(r string) string { return vars[r[2:len(r)-1]] })
}

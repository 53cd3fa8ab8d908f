package cachetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// symptomFixture, set in the environment, makes
// TestSymptomLineCarriesTheTestsFileAndLine the fixture it runs.
const symptomFixture = "KVLAB_CACHETEST_SYMPTOM_FIXTURE"

// TestSymptomLineCarriesTheTestsFileAndLine runs its own test binary again
// with a test that logs a symptom line, and checks that `go test -v` shows
// that line at the test's file and line, where LogSymptoms was called, and
// not inside symptom.go: a learner reading `go test -v -run Pitfall` should
// be able to jump from the line to the test that printed it, and
// scripts/pitfall_lines.py keeps only lines logged from a _test.go file.
func TestSymptomLineCarriesTheTestsFileAndLine(t *testing.T) {
	if os.Getenv(symptomFixture) == "1" {
		sy, at := LogSymptoms(t), here()
		sy.Add("fixture", "logged at %s", at)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSymptomLineCarriesTheTestsFileAndLine$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), symptomFixture+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the fixture run failed: %v\n%s", err, out)
	}
	const marker = "with the bug (fixture): logged at "
	for line := range strings.SplitSeq(string(out), "\n") {
		_, at, ok := strings.Cut(line, marker)
		if !ok {
			continue
		}
		if got, want := strings.TrimSpace(line), at+": "+marker+at; got != want {
			t.Fatalf("the symptom line is reported at the wrong place:\n have %q\n want %q", got, want)
		}
		return
	}
	t.Fatalf("the fixture logged no symptom line:\n%s", out)
}

// here returns its caller's file (base name) and line, as go test prints them.
func here() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", filepath.Base(file), line)
}

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

// symptomFixture, set in the environment to "pass" or "fail", makes the
// test it names in -test.run the fixture it runs: a test that logs a
// symptom line, and fails at the end if told to.
const symptomFixture = "KVLAB_CACHETEST_SYMPTOM_FIXTURE"

// TestSymptomLineCarriesTheTestsFileAndLine checks that `go test -v` shows
// a symptom line at the test's file and line, where LogSymptoms was
// called, and not inside symptom.go: a learner reading
// `go test -v -run Pitfall` should be able to jump from the line to the
// test that printed it, and scripts/pitfall_lines.py keeps only lines
// logged from a _test.go file.
func TestSymptomLineCarriesTheTestsFileAndLine(t *testing.T) {
	if symptomLineFixture(t) {
		return
	}
	line, at := fixtureLine(t, "pass")
	if want := at + ": with the bug (port): logged at " + at + "; fixed (library): the same"; line != want {
		t.Fatalf("the symptom line is not reported where the test called LogSymptoms:\n have %q\n want %q", line, want)
	}
}

// TestSymptomLineOfAFailedTestSaysSo checks that a failed test does not
// label a side "fixed": an exercise that undoes a fix in the library
// fails the test with the library's side showing the bug.
func TestSymptomLineOfAFailedTestSaysSo(t *testing.T) {
	if symptomLineFixture(t) {
		return
	}
	line, at := fixtureLine(t, "fail")
	if want := at + ": with the bug (port): logged at " + at + "; " + notFixed + " (library): the same"; line != want {
		t.Fatalf("the symptom line of a failed test:\n have %q\n want %q", line, want)
	}
}

// symptomLineFixture runs the fixture's part of the calling test when the
// environment asks for it, and reports whether it did. It is no helper:
// the line it logs belongs here, where it calls LogSymptoms.
func symptomLineFixture(t *testing.T) bool {
	mode := os.Getenv(symptomFixture)
	if mode == "" {
		return false
	}
	sy, at := LogSymptoms(t), here()
	sy.Add("port", "logged at %s", at)
	sy.Add("library", "the same")
	if mode == "fail" {
		t.Fail()
	}
	return true
}

// fixtureLine runs the calling test again in a child test binary, as the
// fixture, and returns the symptom line it printed, trimmed, and the place
// the fixture says it called LogSymptoms.
func fixtureLine(t *testing.T, mode string) (line, at string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), symptomFixture+"="+mode)
	out, err := cmd.CombinedOutput()
	if (err != nil) != (mode == "fail") {
		t.Fatalf("the fixture run (%s) ended with %v:\n%s", mode, err, out)
	}
	const marker = "with the bug (port): logged at "
	for l := range strings.SplitSeq(string(out), "\n") {
		if _, rest, ok := strings.Cut(l, marker); ok {
			at, _, _ = strings.Cut(rest, ";")
			return strings.TrimSpace(l), at
		}
	}
	t.Fatalf("the fixture logged no symptom line:\n%s", out)
	return "", ""
}

// here returns its caller's file (base name) and line, as go test prints
// them.
func here() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", filepath.Base(file), line)
}

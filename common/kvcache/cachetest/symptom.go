package cachetest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"kvlab/common/engine"
)

// LogitGap measures how far have's results stray from want's: the largest
// absolute difference between two logits of the same request and output
// position, and how many requests generated other tokens. A pitfall test
// logs both, so `go test -v -run Pitfall` shows the size of the damage and
// not only that there was some. Requests missing from have, and positions
// one side lacks, count as differing tokens and add nothing to the gap.
func LogitGap(have, want map[int]*engine.Result) (gap float64, wrongRequests int) {
	for id, w := range want {
		h := have[id]
		if h == nil {
			wrongRequests++
			continue
		}
		if !sameTokens(h.Samples, w.Samples) || !sameTokens([][]int32{h.Tokens}, [][]int32{w.Tokens}) {
			wrongRequests++
		}
		for i := range min(len(h.Logits), len(w.Logits)) {
			for j := range min(len(h.Logits[i]), len(w.Logits[i])) {
				gap = math.Max(gap, math.Abs(float64(h.Logits[i][j])-float64(w.Logits[i][j])))
			}
		}
	}
	return gap, wrongRequests
}

func sameTokens(a, b [][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if a[i][j] != b[i][j] {
				return false
			}
		}
	}
	return true
}

// Symptoms collects what each side of a pitfall test measured, the side
// with the mistake first, and logs it as one line when the test ends, so
// `go test -v -run Pitfall` shows every symptom with the run's numbers.
type Symptoms struct{ parts []symptom }

type symptom struct {
	bug        bool
	side, text string
}

// notFixed labels a side recorded as fixed when the test failed: then at
// least one side did not do what it was recorded for. An exercise that
// undoes a fix in the library breaks the code the fixed side runs, and a
// line reading "fixed (...)" over the bug's own numbers would tell the
// learner the fix still holds.
const notFixed = "meant to be fixed, but this test failed"

// LogSymptoms returns a collector whose line t logs when it ends. The
// line carries the file and line of the LogSymptoms call, in the test: the
// testing package reports a helper cleanup where it was registered, so
// both this function and the cleanup are marked helpers. Without that,
// every pitfall test's line would read "symptom.go:NN:".
func LogSymptoms(t testing.TB) *Symptoms {
	t.Helper()
	s := &Symptoms{}
	t.Cleanup(func() {
		t.Helper()
		if len(s.parts) > 0 {
			t.Log(s.line(t.Failed()))
		}
	})
	return s
}

// line joins the sides: "with the bug (side): ...; fixed (side): ...".
func (s *Symptoms) line(failed bool) string {
	parts := make([]string, len(s.parts))
	for i, p := range s.parts {
		label := "fixed"
		switch {
		case p.bug:
			label = "with the bug"
		case failed:
			label = notFixed
		}
		parts[i] = fmt.Sprintf("%s (%s): %s", label, p.side, p.text)
	}
	return strings.Join(parts, "; ")
}

// Add records one side's measurements under its name: the first side
// added is the one with the bug, every later one a fixed one.
func (s *Symptoms) Add(side, format string, args ...any) {
	s.parts = append(s.parts, symptom{len(s.parts) == 0, side, fmt.Sprintf(format, args...)})
}

// Bug records a side that has a bug, wherever it comes.
func (s *Symptoms) Bug(side, format string, args ...any) {
	s.parts = append(s.parts, symptom{true, side, fmt.Sprintf(format, args...)})
}

//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
)

// errReport collects, per operation, the largest error every comparison
// with the CPU backend saw, so that a run on hardware prints how close each
// kernel came to its reference and not only that it passed. TestMain prints
// it after the tests (scripts/gpu-check.sh keeps it in tests.txt).
var errReport = struct {
	sync.Mutex
	ops map[string]*opErrors
}{ops: map[string]*opErrors{}}

// opErrors is one operation's line of the report.
type opErrors struct {
	comparisons int
	values      int
	maxErr      float64 // largest error, in the measure named by kind
	tol         float64 // the tolerance it was held to; 0 with kind "bits"
	kind        string
}

// recordErr adds one comparison of n values of op (the first word of a
// check's description) whose largest error was e under tolerance tol.
func recordErr(what string, n int, e, tol float64, kind string) {
	op, _, _ := strings.Cut(what, " ")
	errReport.Lock()
	defer errReport.Unlock()
	r := errReport.ops[op]
	if r == nil {
		r = &opErrors{kind: kind, tol: tol}
		errReport.ops[op] = r
	}
	r.comparisons++
	r.values += n
	r.maxErr = math.Max(r.maxErr, e)
	r.tol = math.Max(r.tol, tol)
}

// scaledErr returns max |have−want| / max(1, |want|): requireClose's measure.
// Values with the same bits count as no error, so that equal infinities
// (the 16-bit caches' tests store some) report 0 rather than NaN.
func scaledErr(have, want []float32) float64 {
	var e float64
	for i := range want {
		if math.Float32bits(have[i]) == math.Float32bits(want[i]) {
			continue
		}
		e = math.Max(e, math.Abs(float64(have[i])-float64(want[i]))/math.Max(1, math.Abs(float64(want[i]))))
	}
	return e
}

// printErrReport writes the report, one operation a line, in name order.
func printErrReport(w io.Writer) {
	errReport.Lock()
	defer errReport.Unlock()
	if len(errReport.ops) == 0 {
		return
	}
	names := make([]string, 0, len(errReport.ops))
	for op := range errReport.ops {
		names = append(names, op)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "kernel errors against the CPU backend (largest over every comparison of each operation):")
	fmt.Fprintf(w, "  %-14s %11s %11s  %-10s %9s  %s\n", "operation", "comparisons", "values", "max error", "tolerance", "measure")
	for _, op := range names {
		r := errReport.ops[op]
		tol := fmt.Sprintf("%9.1g", r.tol)
		if r.kind == "bits" {
			tol = fmt.Sprintf("%9s", "exact")
		}
		fmt.Fprintf(w, "  %-14s %11d %11d  %-10.3g %s  %s\n", op, r.comparisons, r.values, r.maxErr, tol, r.kind)
	}
}

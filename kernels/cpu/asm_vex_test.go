package cpu

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// vecOperand matches an operand that names a vector register (X0..X31,
// Y.., Z..) or a macro parameter that stands for one (a bare X, Y or Z).
var vecOperand = regexp.MustCompile(`^[XYZ][0-9]*$`)

// TestAMD64AssemblyIsAllVEX holds every instruction of the amd64 kernels
// that touches a vector register to a VEX or EVEX encoding (a mnemonic
// starting with V). A legacy SSE instruction (MOVL AX, X2 is one: it
// assembles to MOVD) run while the upper halves of the YMM registers hold
// data costs a state transition on Intel cores: BCAST's MOVL once made
// every call of expShiftAVX2 take about 1.7 µs on a Xeon, sixty times the
// eight vectors' own work (BenchmarkExpShiftBlock), and attention calls it
// once per 64 keys and head.
func TestAMD64AssemblyIsAllVEX(t *testing.T) {
	files, err := filepath.Glob("*_amd64.s")
	if err != nil || len(files) == 0 {
		t.Fatalf("no amd64 assembly found (%v)", err)
	}
	checked := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(src), "\n") {
			if i := strings.Index(line, "//"); i >= 0 {
				line = line[:i]
			}
			line = strings.TrimSuffix(strings.TrimSpace(line), `\`)
			// A macro's body puts several instructions on a line.
			for _, ins := range strings.Split(line, ";") {
				fields := strings.Fields(strings.ReplaceAll(ins, ",", " "))
				if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasSuffix(fields[0], ":") || strings.Contains(fields[0], "(") {
					continue
				}
				vector := false
				for _, op := range fields[1:] {
					vector = vector || vecOperand.MatchString(op)
				}
				if !vector {
					continue
				}
				checked++
				if !strings.HasPrefix(fields[0], "V") {
					t.Errorf("%s:%d: %s is a legacy SSE instruction on a vector register; use its V form", f, n+1, strings.TrimSpace(ins))
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d vector instructions checked: is the parser still reading the files?", checked)
	}
}

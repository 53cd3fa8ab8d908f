package radix

import (
	"fmt"
	"strings"
	"testing"
)

// symptoms collects what each side of a pitfall test measured, the side
// with the mistake first, and logs it as one line when the test ends, so
// `go test -v -run Pitfall` shows every symptom with the run's numbers.
type symptoms struct{ parts []string }

func logSymptoms(t *testing.T) *symptoms {
	s := &symptoms{}
	t.Cleanup(func() {
		if len(s.parts) > 0 {
			t.Log(strings.Join(s.parts, "; "))
		}
	})
	return s
}

// add records one side's measurements under its name: the first side
// added is the one with the bug, every later one a fixed one.
func (s *symptoms) add(side, format string, args ...any) {
	label := "fixed"
	if len(s.parts) == 0 {
		label = "with the bug"
	}
	s.parts = append(s.parts, fmt.Sprintf("%s (%s): ", label, side)+fmt.Sprintf(format, args...))
}

// bug records a side that has a bug, wherever it comes.
func (s *symptoms) bug(side, format string, args ...any) {
	s.parts = append(s.parts, fmt.Sprintf("with the bug (%s): ", side)+fmt.Sprintf(format, args...))
}

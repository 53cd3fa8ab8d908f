package trie

import (
	"fmt"
	"math"
	"slices"
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

// outGap compares two runs: the largest logit difference over every
// request and position, and how many of want's requests generated other
// tokens in have.
func outGap(have, want map[int]*outcome) (gap float64, wrong int) {
	for id, w := range want {
		h := have[id]
		if h == nil || !slices.Equal(h.Tokens, w.Tokens) {
			wrong++
		}
		if h == nil {
			continue
		}
		for i := range min(len(h.Logits), len(w.Logits)) {
			for j := range min(len(h.Logits[i]), len(w.Logits[i])) {
				gap = math.Max(gap, math.Abs(float64(h.Logits[i][j])-float64(w.Logits[i][j])))
			}
		}
	}
	return gap, wrong
}

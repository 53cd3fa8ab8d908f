package bound

import (
	"strings"
	"testing"
)

func TestSaltsNeverShare(t *testing.T) {
	tr := NewTrace(2)
	tr.Commit("a", []int32{1, 2, 3, 4})
	tr.Lookup("b", []int32{1, 2, 3, 4})
	tr.Lookup("", []int32{1, 2, 3, 4})
	tr.Lookup("a", []int32{1, 2, 3, 4})
	if got := tr.Infinite(); got != 4 {
		t.Errorf("infinite: %d hit tokens, want 4 (the lookup under salt a only)", got)
	}
	if got := tr.Optimal(8); got != 4 {
		t.Errorf("optimal: %d hit tokens, want 4", got)
	}
	if tr.Blocks() != 6 {
		t.Errorf("%d distinct blocks, want 6: two per salt", tr.Blocks())
	}
}

func TestOnlyWholeBlocksHit(t *testing.T) {
	tr := NewTrace(4)
	tr.Commit("", []int32{1, 2, 3, 4, 5, 6, 7})    // one whole block, three tokens left over
	tr.Lookup("", []int32{1, 2, 3, 4, 5, 6, 7})    // hits the whole block only
	tr.Commit("", []int32{1, 2, 3, 4, 5, 6, 7, 8}) // now two
	tr.Lookup("", []int32{1, 2, 3, 4, 5, 6, 7, 8}) // a prompt of whole blocks hits entirely
	if got := tr.Infinite(); got != 4+8 {
		t.Errorf("infinite: %d hit tokens, want 12", got)
	}
	if tr.PromptTokens() != 15 || tr.Lookups() != 2 {
		t.Errorf("%d lookups of %d tokens, want 2 of 15", tr.Lookups(), tr.PromptTokens())
	}
}

// The case the package comment gives: at capacity 2, keeping x while its
// parent q is gone (q comes back with a commit before the lookup of q,x)
// beats every schedule that keeps parents.
func TestKeepingAChildWithoutItsParentCanWin(t *testing.T) {
	const w, q, x = 7, 8, 9
	tr := NewTrace(1)
	tr.Commit("", []int32{w})
	tr.Commit("", []int32{q, x})
	tr.Lookup("", []int32{w})
	tr.Commit("", []int32{q})
	tr.Lookup("", []int32{q, x})
	if got, tree := tr.Optimal(2), brute(tr, 2, true); got != 3 || tree != 2 {
		t.Errorf("optimal %d, trees at best %d; want 3 and 2", got, tree)
	}
	if got := tr.OptimalLeaves(2); got != 2 {
		t.Errorf("leaves only: %d, want 2", got)
	}
}

func TestServedOneAfterAnother(t *testing.T) {
	sys := []int32{1, 2, 3, 4}
	reqs := []Request{
		{Prompt: append(sys[:4:4], 10, 11)},
		{Prompt: append(sys[:4:4], 20, 21), Commit: append(sys[:4:4], 20, 21, 30, 31)},
		{Prompt: append(sys[:4:4], 20, 21, 30, 31, 40)}, // the second's next turn
		{Salt: "t", Prompt: append(sys[:4:4], 10, 11)},
	}
	tr := FromRequests(2, reqs)
	// Infinite: the second and third share the system prompt (4), the
	// third the second's whole turn (4 more); the salted one nothing.
	if got := tr.Infinite(); got != 4+8 {
		t.Errorf("infinite: %d, want 12", got)
	}
	// Two blocks: the system prompt's, which each unsalted request hits.
	if got := tr.Optimal(2); got != 4+4 {
		t.Errorf("optimal at 2 blocks: %d, want 8", got)
	}
	if got := tr.Optimal(4); got != 12 {
		t.Errorf("optimal at 4 blocks: %d, want 12", got)
	}
	if got := tr.Optimal(0); got != 0 {
		t.Errorf("optimal at 0 blocks: %d", got)
	}
}

func TestReportFitsANarrowColumn(t *testing.T) {
	r := Report{BlockSize: 16, Capacity: 4096, Lookups: 10000, PromptTokens: 999_999_999, Achieved: 123_456_789, Optimal: 223_456_789, Leaves: 223_456_789, Infinite: 999_999_999}
	s := r.String()
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if n := len([]rune(line)); n > 32 {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
	for _, want := range []string{"achieved", "12.3", "optimal", "22.3", "infinite", "100.0"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "tree rule") {
		t.Errorf("a tree rule row where the rule reaches the optimum:\n%s", s)
	}
	r.Leaves = 1
	if s := r.String(); !strings.Contains(s, "tree rule") {
		t.Errorf("no tree rule row where the rule falls short:\n%s", s)
	}
	if (Report{}).Rate(5) != 0 {
		t.Error("a rate over no prompt tokens is not 0")
	}
}

package bound

import (
	"fmt"
	"strconv"
	"strings"
)

// Report puts what a run's cache achieved beside what any cache of the
// same capacity could have (Optimal) and what one that never evicts would
// (Infinite). Hits are prompt tokens served from the cache; a rate is hits
// over PromptTokens.
type Report struct {
	BlockSize    int // tokens per block
	Capacity     int // blocks the cache may hold
	Lookups      int // requests looked up
	PromptTokens int // tokens of their prompts

	Achieved int // hit tokens of the run, as the caller measured them
	Optimal  int // the most any eviction schedule could reach (Trace.Optimal)
	// Leaves is what a tree reaches under the same rule on leaves only
	// (Trace.OptimalLeaves): the best a tree design could do lies between
	// it and Optimal, and is Optimal when the two agree.
	Leaves   int
	Infinite int // hit tokens with no eviction (Trace.Infinite)
}

// Report computes the optimum at capacity, the leaves' rule and the
// infinite cache's hits for t, beside achieved.
func (t *Trace) Report(capacity, achieved int) Report {
	return Report{
		BlockSize:    t.blockSize,
		Capacity:     capacity,
		Lookups:      t.lookups,
		PromptTokens: t.promptTokens,
		Achieved:     achieved,
		Optimal:      t.Optimal(capacity),
		Leaves:       t.OptimalLeaves(capacity),
		Infinite:     t.Infinite(),
	}
}

// Rate returns hits over the prompt tokens, 0 when there were none.
func (r Report) Rate(hits int) float64 {
	if r.PromptTokens == 0 {
		return 0
	}
	return float64(hits) / float64(r.PromptTokens)
}

// String draws the report as a table, at most 32 columns wide for runs of
// under ten billion prompt tokens, so that it fits beside another in a
// terminal or in a narrow column of a page. The leaves' rule has a row
// only when it falls short of the optimum: without it, the optimum is what
// a tree design could reach too.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %15d\n", "cache blocks", r.Capacity)
	fmt.Fprintf(&b, "%-16s %15d\n", "tokens per block", r.BlockSize)
	fmt.Fprintf(&b, "%-16s %15d\n", "lookups", r.Lookups)
	fmt.Fprintf(&b, "%-16s %15d\n", "prompt tokens", r.PromptTokens)
	fmt.Fprintf(&b, "%-9s %14s %7s\n", "", "hit tokens", "hit %")
	type row struct {
		name string
		hits int
	}
	rows := []row{{"achieved", r.Achieved}, {"optimal", r.Optimal}}
	if r.Leaves < r.Optimal {
		rows = append(rows, row{"tree rule", r.Leaves})
	}
	for _, row := range append(rows, row{"infinite", r.Infinite}) {
		fmt.Fprintf(&b, "%-9s %14d %7s\n", row.name, row.hits, strconv.FormatFloat(100*r.Rate(row.hits), 'f', 1, 64))
	}
	return b.String()
}

package ghost

import (
	"fmt"
	"strings"
	"sync"

	"kvlab/common/kvcache"
)

// Report is what a Tap (or a Board of them) has counted: the real cache's
// row first, then one per ghost in Config.Policies order.
//
// It counts admissions: a Match followed by an Insert, as every admission
// that computes or commits anything is (readmissions after a preemption
// included). A Match whose sequence is released before any Insert, an
// admission the pool could not grow and gave back, is not counted; the
// engine retries it later, and that Match counts.
type Report struct {
	Matches int64 // admissions counted
	Queried int64 // prompt tokens they looked up
	Rows    []Row
}

// Row is one cache's line of a Report.
type Row struct {
	Name string
	// Hits is the tokens its Matches found cached (the real cache's as the
	// real Match reported them; a ghost's as it would have), summed.
	Hits int64
	// HitRate is Hits over Report.Queried (0 before any Match).
	HitRate float64
	// Evicted counts the blocks it evicted: the real cache's Stats, and,
	// for a ghost, every block it dropped (one its writer still held
	// included, as the radix tree counts them).
	Evicted int64
	// Cached is the blocks it holds now.
	Cached int
}

func (r *Report) rates() {
	for i := range r.Rows {
		r.Rows[i].HitRate = 0
		if r.Queried > 0 {
			r.Rows[i].HitRate = float64(r.Rows[i].Hits) / float64(r.Queried)
		}
	}
}

// nameWidth is the widest cache name Table prints; longer ones are cut.
// With it, a line of the largest counts is 112 columns.
const nameWidth = 28

// Table formats the report as a text table of at most 120 columns: one line
// per cache with its hit tokens, hit rate, hit tokens against the real
// cache's, evictions and cached blocks.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d matches, %d prompt tokens looked up\n", r.Matches, r.Queried)
	fmt.Fprintf(&b, "%-*s %19s %9s %20s %19s %12s\n", nameWidth, "cache", "hit tokens", "hit rate", "vs real", "evicted", "cached")
	var real int64
	if len(r.Rows) > 0 {
		real = r.Rows[0].Hits
	}
	for i, row := range r.Rows {
		vs := "—"
		if i > 0 {
			vs = fmt.Sprintf("%+d", row.Hits-real)
		}
		fmt.Fprintf(&b, "%-*s %19d %8.1f%% %20s %19d %12d\n", nameWidth, clip(row.Name, nameWidth), row.Hits, 100*row.HitRate, vs, row.Evicted, row.Cached)
	}
	return b.String()
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Board collects the Taps one wrapped builder made (one per pool: an engine
// builds one; a benchmark that builds an engine per run, several) and
// reports them together. Any goroutine may call its methods.
type Board struct {
	mu   sync.Mutex
	taps []*Tap
}

// Wrap returns a builder whose caches are build's, each in a Tap with the
// ghosts of cfg (capacity: the allocator's blocks), and the Board that
// reports them. It is what engine.Config.PrefixCache takes:
//
//	cfg.PrefixCache, board = ghost.Wrap(radix.PrefixCache, ghost.Config{Policies: ghost.Standard(nil)})
func Wrap(build Builder, cfg Config) (Builder, *Board) {
	b := &Board{}
	return func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache {
		t := NewTap(build(a, blockSize), blockSize, a.Total(), cfg)
		b.mu.Lock()
		b.taps = append(b.taps, t)
		b.mu.Unlock()
		return t
	}, b
}

// Taps returns the Taps the builder has made, oldest first.
func (b *Board) Taps() []*Tap {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Tap(nil), b.taps...)
}

// Report sums the reports of every Tap the builder made (their rows match:
// one Config made them all). With no Tap yet it is empty.
func (b *Board) Report() Report {
	var sum Report
	for _, t := range b.Taps() {
		r := t.Report()
		sum.Matches += r.Matches
		sum.Queried += r.Queried
		if sum.Rows == nil {
			sum.Rows = make([]Row, len(r.Rows))
		}
		for i, row := range r.Rows {
			s := &sum.Rows[i]
			s.Name = row.Name
			s.Hits += row.Hits
			s.Evicted += row.Evicted
			s.Cached += row.Cached
		}
	}
	sum.rates()
	return sum
}

// Standard returns one ghost of each policy, for a report that compares
// them all: LRU, LFU, SLRU with an 80% protected segment, ARC, and the
// priority policy with retention (nil: every block at DefaultPriority).
func Standard(retention RetentionFunc) []Policy {
	return []Policy{LRU(), LFU(), SLRU(0.8), ARC(), Priority(retention)}
}

package ghost

import (
	"math"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
	"kvlab/phase08_prefix/radix"
)

// TestReportIsReadWhileTheEngineRuns serves requests on one goroutine
// while another reads the Board's report without pause, as a /metrics
// handler would; under the race detector (go test -race) any unguarded
// read fails it. Every report read must be one the counters passed through: hits
// never fall, and never exceed the tokens looked up.
func TestReportIsReadWhileTheEngineRuns(t *testing.T) {
	m := modeltest.Load(t, model.ArchLlama, 1)
	cfg := engine.DefaultConfig()
	cfg.NumBlocks, cfg.MaxBatchTokens = 24, 64
	var board *Board
	cfg.PrefixCache, board = Wrap(radix.PrefixCache, Config{Policies: Standard(nil)})
	e, err := engine.New(m, cfg)
	require.NoError(t, err)
	defer e.Close()
	var reqs []engine.Request
	for i := range 24 {
		reqs = append(reqs, engine.Request{ID: i, Prompt: cachetest.Join(cachetest.Tokens(0, 64), cachetest.Tokens(100+i*16, 16)), MaxTokens: 4, IgnoreEOS: true})
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	reads := 0
	go func() {
		defer wg.Done()
		var last Report
		for {
			r := board.Report()
			reads++
			for i, row := range r.Rows {
				if row.Hits > r.Queried || (len(last.Rows) > 0 && row.Hits < last.Rows[i].Hits) {
					t.Errorf("report %d, row %s: %d hit tokens of %d looked up, %d before", reads, row.Name, row.Hits, r.Queried, last.Rows[i].Hits)
				}
			}
			last = r
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for id, res := range e.RunAll(reqs) {
		require.NoError(t, res.Err, "request %d", id)
	}
	close(done)
	wg.Wait()
	r := board.Report()
	require.Equal(t, int64(24+e.Stats().Preemptions), r.Matches, "one counted admission per request and readmission")
	require.Equal(t, int64(e.Stats().MatchedTokens), r.Rows[0].Hits)
	require.Positive(t, r.Rows[0].Hits)
	require.Len(t, r.Rows, 6)
	t.Logf("%d reports read while serving\n%s", reads, r.Table())
}

// TestBoardSumsItsTaps: a builder called twice (two engines, or a
// benchmark's runs) reports the sum of both Taps.
func TestBoardSumsItsTaps(t *testing.T) {
	build, board := Wrap(radix.PrefixCache, Config{Policies: []Policy{LRU()}, Real: "radix"})
	require.Empty(t, board.Report().Rows)
	for range 2 {
		h := cachetest.NewHarness(t, cachetest.Factory(build), 16, 4)
		p := cachetest.Tokens(0, 8)
		h.Start(0, p)
		h.Finish(0)
		h.Start(1, p)
		h.Finish(1)
	}
	require.Len(t, board.Taps(), 2)
	r := board.Report()
	require.Equal(t, int64(4), r.Matches)
	require.Equal(t, int64(32), r.Queried)
	require.Equal(t, []Row{{Name: "radix", Hits: 16, HitRate: 0.5, Cached: 4}, {Name: "LRU", Hits: 16, HitRate: 0.5, Cached: 4}}, r.Rows)
}

// TestTableFitsIn120Columns: every line of the table fits 120 columns,
// names too long for their column included, and the largest counts (a
// trillion blocks cached).
func TestTableFitsIn120Columns(t *testing.T) {
	long := strings.Repeat("a very long policy name ", 8)
	r := Report{Matches: math.MaxInt64, Queried: math.MaxInt64, Rows: []Row{
		{Name: "real", Hits: math.MaxInt64, HitRate: 1, Evicted: math.MaxInt64, Cached: 999_999_999_999},
		{Name: long, Hits: 0, HitRate: 0, Evicted: math.MaxInt64, Cached: 999_999_999_999},
		{Name: "LRU", Hits: 1 << 40, HitRate: 0.5, Evicted: 0, Cached: 0},
	}}
	table := r.Table()
	for _, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), 120, "line %q", line)
	}
	require.Contains(t, table, "a very long policy name a v…")
	require.Contains(t, table, "-9223372036854775807", "against the real cache's hits")
	t.Logf("\n%s", table)
}

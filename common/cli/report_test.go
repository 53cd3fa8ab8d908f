package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/metrics"
)

// tableCells reads the header and the rows of a table that reportHTTP
// printed into maps from header to cell.
func tableCells(t *testing.T, out string, rows int) []map[string]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	require.Greater(t, len(lines), rows)
	header := cellSep.Split(lines[0], -1)
	var cells []map[string]string
	for _, l := range lines[1 : rows+1] {
		row := cellSep.Split(strings.TrimSpace(l), -1)
		require.Len(t, row, len(header), "row %q", l)
		m := map[string]string{}
		for i, h := range header {
			m[h] = row[i]
		}
		cells = append(cells, m)
	}
	return cells
}

func TestReportHTTPMarksNAAtBothWidths(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	run := func(name string) *metrics.Run {
		return &metrics.Run{
			Name: name, Wall: time.Second,
			Requests: []metrics.RequestRecord{{ID: 0, PromptLen: 8, OutputLen: 1, FirstToken: ms(5), Finish: ms(5), TokenTimes: []time.Duration{ms(5)}}},
			Engine:   metrics.EngineStats{PrefillTokensComputed: 8},
		}
	}
	runs := []*metrics.Run{run("radix tree (prefix)"), run("hash + CoW (hashcow)")}
	na := [][]string{{"prefill tok", "peak blocks"}, {"of optimum %", "preempted"}}

	var narrow, wide strings.Builder
	require.NoError(t, reportHTTP(&narrow, runs, na, reportOptions{what: "t"}))
	require.NoError(t, reportHTTP(&wide, runs, na, reportOptions{what: "t", wide: true}))

	have := tableCells(t, narrow.String(), 2)
	assert.Equal(t, "n/a", have[0]["prefill tok"])
	assert.Equal(t, "8", have[1]["prefill tok"])
	assert.Equal(t, "n/a", have[1]["of optimum %"])
	_, ok := have[0]["peak blocks"]
	assert.False(t, ok, "the default table has no peak blocks column")
	assert.Contains(t, narrow.String(), "n/a: not in the server's /metrics (prefill tok, peak blocks, of optimum %, preempted)")
	for _, l := range strings.Split(narrow.String(), "\n")[:3] {
		assert.Less(t, len([]rune(l)), 120, "%q", l)
	}

	have = tableCells(t, wide.String(), 2)
	want := []string{"n/a", "8", "n/a", "0"}
	if diff := cmp.Diff(want, []string{have[0]["peak blocks"], have[1]["prefill tok"], have[1]["of optimum %"], have[0]["preempted"]}); diff != "" {
		t.Errorf("wide cells (-want +have):\n%s", diff)
	}
	assert.Equal(t, "n/a", have[1]["preempted"])
}

func TestPlotPaths(t *testing.T) {
	tests := []struct{ in, cdf, prefill string }{
		{"out/phase08-prefix_caching.svg", "out/phase08-prefix_caching-cdf.svg", "out/phase08-prefix_caching-prefill.svg"},
		{"ttft", "ttft-cdf.svg", "ttft-prefill.svg"},
		{"a.b/ttft.SVG", "a.b/ttft-cdf.SVG", "a.b/ttft-prefill.SVG"},
	}
	for _, tt := range tests {
		cdf, prefill := plotPaths(tt.in)
		assert.Equal(t, tt.cdf, cdf, tt.in)
		assert.Equal(t, tt.prefill, prefill, tt.in)
	}
}

func TestReportWritesThreePlots(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "sub", "ttft.svg")
	r := &metrics.Run{Name: "x", Requests: []metrics.RequestRecord{{ID: 0, Err: "boom"}}}
	var out strings.Builder
	err := report(&out, []*metrics.Run{r}, reportOptions{what: "t", plotPath: plot})
	require.Error(t, err, "a failed request fails the report")
	for _, p := range []string{plot, filepath.Join(dir, "sub", "ttft-cdf.svg"), filepath.Join(dir, "sub", "ttft-prefill.svg")} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Contains(t, string(b), "<svg")
		assert.Contains(t, out.String(), p)
	}
}

func TestBenchWideShowsEveryColumn(t *testing.T) {
	dir := smallModel(t, "llama")
	args := []string{"bench", "-model", dir, "-requests", "2", "-prefix-len", "16", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-rps", "1000", "-quiet", "-plot", ""}
	code, narrow, stderr := run(args...)
	require.Equal(t, 0, code, stderr)
	code, wide, stderr := run(append(args, "-wide")...)
	require.Equal(t, 0, code, stderr)
	for _, col := range []string{"reqs", "E2E p99 ms", "evicted", "peak blocks", "preempted"} {
		assert.NotContains(t, strings.SplitN(narrow, "\n", 2)[0], col)
		assert.Contains(t, strings.SplitN(wide, "\n", 2)[0], col)
	}
}

package metrics

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteTableColumns(t *testing.T) {
	rows := []Summary{
		{Name: "no-cache", Requests: 48, HitRate: 0},
		{Name: "prefix-cache", Requests: 48, Failed: 1, HitRate: 0.875, PrefillTokensComputed: 12345, OptimalPrefill: 12000, Evictions: 7, BlockCopies: 3, PeakBlocks: 99, MaxRunning: 5, Preemptions: 2},
	}
	var b strings.Builder
	WriteTable(&b, rows)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 3, "header plus one line per row")

	for _, col := range []string{
		"name", "reqs", "failed", "TTFT p50 (ms)", "TTFT p99 (ms)",
		"ITL p50 (ms)", "ITL p99 (ms)", "E2E p50 (ms)", "E2E p99 (ms)",
		"out (tok/s)", "prefill (tok)", "of optimum (%)", "hit (%)", "evicted", "CoW", "peak blocks", "max running", "preempted",
	} {
		assert.Contains(t, lines[0], col)
	}
	assert.True(t, strings.HasPrefix(lines[1], "no-cache "), "have %q; want the name left-aligned", lines[1])
	assert.Regexp(t, `12345 +102\.9 +87\.5 +7 +3 +99 +5 +2$`, lines[2], "prefill, its share of the optimum, hit rate in percent, evictions, copies, peak blocks")
	for i, l := range lines {
		assert.Equal(t, len(lines[0]), len(l), "line %d: have width %d; want %d", i, len(l), len(lines[0]))
	}
}

func TestWriteTableEmpty(t *testing.T) {
	var b strings.Builder
	WriteTable(&b, nil)
	assert.Equal(t, 1, strings.Count(b.String(), "\n"), "have %q; want just the header", b.String())
}

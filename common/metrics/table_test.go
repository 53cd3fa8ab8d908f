package metrics

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tableLines(t *testing.T, write func(*strings.Builder)) []string {
	t.Helper()
	var b strings.Builder
	write(&b)
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func TestWriteTableColumns(t *testing.T) {
	rows := []Summary{
		{Name: "no-cache", Requests: 48, HitRate: 0},
		{Name: "prefix-cache", Requests: 48, Failed: 1, HitRate: 0.875, PrefillTokensComputed: 12345, OptimalPrefill: 12000, Evictions: 7, BlockCopies: 3, PeakBlocks: 99, MaxRunning: 5, Preemptions: 2},
	}
	lines := tableLines(t, func(b *strings.Builder) { WriteTable(b, rows) })
	require.Len(t, lines, 3, "header plus one line per row")

	want := []string{"name", "failed", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "out tok/s", "prefill tok", "of optimum %", "hit %"}
	if diff := cmp.Diff(want, strings.Split(lines[0], "  "), cmpNonEmpty); diff != "" {
		t.Errorf("default header (-want +have):\n%s", diff)
	}
	assert.True(t, strings.HasPrefix(lines[1], "no-cache "), "have %q; want the name left-aligned", lines[1])
	assert.Regexp(t, `12345 +102\.9 +87\.5$`, lines[2], "prefill, its share of the optimum, hit rate in percent")
	for i, l := range lines {
		assert.Equal(t, len(lines[0]), len(l), "line %d: have width %d; want %d", i, len(l), len(lines[0]))
	}
}

func TestWriteWideTableColumns(t *testing.T) {
	rows := []Summary{
		{Name: "prefix-cache", Requests: 48, Failed: 1, HitRate: 0.875, PrefillTokensComputed: 12345, OptimalPrefill: 12000, Evictions: 7, BlockCopies: 3, PeakBlocks: 99, MaxRunning: 5, Preemptions: 2},
	}
	lines := tableLines(t, func(b *strings.Builder) { WriteWideTable(b, rows) })
	require.Len(t, lines, 2)
	want := []string{
		"name", "reqs", "failed", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "E2E p50 ms", "E2E p99 ms",
		"out tok/s", "prefill tok", "of optimum %", "hit %", "evicted", "CoW", "peak blocks", "max running", "preempted",
	}
	if diff := cmp.Diff(want, strings.Split(lines[0], "  "), cmpNonEmpty); diff != "" {
		t.Errorf("wide header (-want +have):\n%s", diff)
	}
	assert.Regexp(t, `12345 +102\.9 +87\.5 +7 +3 +99 +5 +2$`, lines[1], "prefill, its share of the optimum, hit rate, evictions, copies, peak blocks, max running, preempted")
}

// cmpNonEmpty drops the empty strings that splitting a padded line on two
// spaces leaves, and trims the rest.
var cmpNonEmpty = cmp.Transformer("cells", func(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
})

func TestWriteTableFitsIn120Columns(t *testing.T) {
	rows := []Summary{
		{Name: "baseline", Requests: 200, PrefillTokensComputed: 1234567, OptimalPrefill: 4817},
		{Name: "radix tree (prefix)", Requests: 200, PrefillTokensComputed: 4900, OptimalPrefill: 4817, HitRate: 0.9},
		{Name: "hash + CoW (hashcow)", Requests: 200, PrefillTokensComputed: 4900, OptimalPrefill: 4817, HitRate: 0.9},
		{Name: "http://127.0.0.1:65535", Requests: 200, PrefillTokensComputed: 4900, OptimalPrefill: 4817, HitRate: 0.9},
		{Name: "a compressed trie with a name far longer than any table wants", Requests: 200, Failed: 12, OutputTokensPerSec: 12345.6},
	}
	for i := range rows {
		rows[i].TTFT.P50, rows[i].TTFT.P99, rows[i].ITL.P50 = 98765e6, 123456e6, 1234e6 // long numbers, in ms
	}
	lines := tableLines(t, func(b *strings.Builder) { WriteTable(b, rows) })
	require.Len(t, lines, 6)
	for i, l := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 120, "line %d is %d columns: %q", i, utf8.RuneCountInString(l), l)
	}
	assert.True(t, strings.HasPrefix(lines[2], "radix tree (prefix) "), "a 20-character name is kept whole: %q", lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "hash + CoW (hashcow) "), "a 20-character name is kept whole: %q", lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "http://127.0.0.1:65535 "), "a server's URL is kept whole: %q", lines[4])
	assert.Regexp(t, `^a compressed trie .*… `, lines[5], "a longer name is cut short")

	wide := tableLines(t, func(b *strings.Builder) { WriteWideTable(b, rows) })
	assert.True(t, strings.HasPrefix(wide[5], rows[4].Name+" "), "the wide table keeps the name whole")
}

func TestWriteTableEmpty(t *testing.T) {
	var b strings.Builder
	WriteTable(&b, nil)
	assert.Equal(t, 1, strings.Count(b.String(), "\n"), "have %q; want just the header", b.String())
}

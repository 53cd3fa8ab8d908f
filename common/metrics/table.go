package metrics

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// column is one table column: a header carrying its unit, and how to render
// a summary's value.
type column struct {
	header string
	value  func(Summary) string
}

var tableColumns = []column{
	{"name", func(s Summary) string { return s.Name }},
	{"reqs", func(s Summary) string { return strconv.Itoa(s.Requests) }},
	{"failed", func(s Summary) string { return strconv.Itoa(s.Failed) }},
	{"TTFT p50 (ms)", func(s Summary) string { return ms(s.TTFT.P50) }},
	{"TTFT p99 (ms)", func(s Summary) string { return ms(s.TTFT.P99) }},
	{"ITL p50 (ms)", func(s Summary) string { return ms(s.ITL.P50) }},
	{"ITL p99 (ms)", func(s Summary) string { return ms(s.ITL.P99) }},
	{"E2E p50 (ms)", func(s Summary) string { return ms(s.E2E.P50) }},
	{"E2E p99 (ms)", func(s Summary) string { return ms(s.E2E.P99) }},
	{"out (tok/s)", func(s Summary) string { return strconv.FormatFloat(s.OutputTokensPerSec, 'f', 1, 64) }},
	{"prefill (tok)", func(s Summary) string { return strconv.Itoa(s.PrefillTokensComputed) }},
	{"of optimum (%)", func(s Summary) string {
		if s.OptimalPrefill == 0 {
			return "-"
		}
		return strconv.FormatFloat(100*float64(s.PrefillTokensComputed)/float64(s.OptimalPrefill), 'f', 1, 64)
	}},
	{"hit (%)", func(s Summary) string { return strconv.FormatFloat(100*s.HitRate, 'f', 1, 64) }},
	{"evicted", func(s Summary) string { return strconv.Itoa(s.Evictions) }},
	{"CoW", func(s Summary) string { return strconv.Itoa(s.BlockCopies) }},
	{"peak blocks", func(s Summary) string { return strconv.Itoa(s.PeakBlocks) }},
	{"max running", func(s Summary) string { return strconv.Itoa(s.MaxRunning) }},
	{"preempted", func(s Summary) string { return strconv.Itoa(s.Preemptions) }},
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// WriteTable prints one row per summary under a header, the name column
// left-aligned and the numbers right-aligned so that rows compare digit by
// digit. Write errors are ignored: the table is for people, and a terminal
// that went away leaves nobody to tell.
func WriteTable(w io.Writer, rows []Summary) {
	cells := make([][]string, 0, len(rows)+1)
	header := make([]string, len(tableColumns))
	for i, c := range tableColumns {
		header[i] = c.header
	}
	cells = append(cells, header)
	for _, s := range rows {
		row := make([]string, len(tableColumns))
		for i, c := range tableColumns {
			row[i] = c.value(s)
		}
		cells = append(cells, row)
	}

	width := make([]int, len(tableColumns))
	for _, row := range cells {
		for i, v := range row {
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}

	var b strings.Builder
	for _, row := range cells {
		for i, v := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(v))
			if i == 0 {
				b.WriteString(v + pad)
			} else {
				b.WriteString("  " + pad + v)
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprint(w, b.String())
}

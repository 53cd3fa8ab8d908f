package metrics

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svgElements decodes doc fully, failing the test on malformed XML, and
// returns every start element in document order.
func svgElements(t *testing.T, doc []byte) []xml.StartElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var out []xml.StartElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err, "SVG is not well-formed XML")
		if se, ok := tok.(xml.StartElement); ok {
			out = append(out, se.Copy())
		}
	}
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func TestWriteTTFTPlot(t *testing.T) {
	runs := sampleRuns()
	runs[1].Name = `cached <&> "quoted"` // must be escaped
	var b bytes.Buffer
	require.NoError(t, WriteTTFTPlot(&b, runs, "TTFT & friends"))

	els := svgElements(t, b.Bytes())
	require.NotEmpty(t, els)
	assert.Equal(t, "svg", els[0].Name.Local)

	var series []string
	polylines := 0
	for _, e := range els {
		if e.Name.Local == "g" && attr(e, "class") == "series" {
			series = append(series, attr(e, "data-run"))
		}
		if e.Name.Local == "polyline" {
			polylines++
		}
	}
	assert.Equal(t, []string{"baseline", `cached <&> "quoted"`}, series)
	assert.Equal(t, len(runs), polylines, "have %v polylines; want one per run", polylines)
	assert.Contains(t, b.String(), "TTFT (ms)")
	assert.Contains(t, b.String(), "request index")
}

func TestWriteTTFTPlotDegenerate(t *testing.T) {
	tests := []struct {
		name string
		runs []*Run
	}{
		{"no runs", nil},
		{"empty run", []*Run{{Name: "empty"}}},
		{"only failures", []*Run{{Name: "f", Requests: []RequestRecord{{Err: "x"}}}}},
		{"single request", []*Run{{Name: "one", Requests: []RequestRecord{record(0, 0, 1, 0, 5)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteTTFTPlot(&b, tt.runs, "t"))
			svgElements(t, b.Bytes())
			assert.NotContains(t, b.String(), "NaN")
			assert.NotContains(t, b.String(), "Inf")
			assert.Equal(t, len(tt.runs), strings.Count(b.String(), "<polyline"))
		})
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct{ span, want float64 }{
		{0, 1}, {6, 1}, {10, 2}, {25, 5}, {47, 10}, {600, 100}, {0.9, 0.2},
	}
	for _, tt := range tests {
		have := niceStep(tt.span)
		assert.InDelta(t, tt.want, have, 1e-12, "span %v: have %v; want %v", tt.span, have, tt.want)
	}
}

func TestTTFTPlotUsesALogAxisForWideRanges(t *testing.T) {
	run := func(name string, ttftMS ...int) *Run {
		r := &Run{Name: name}
		for i, ms := range ttftMS {
			at := time.Duration(ms) * time.Millisecond
			r.Requests = append(r.Requests, RequestRecord{ID: i, FirstToken: at, TokenTimes: []time.Duration{at}})
		}
		return r
	}
	var wide, narrow strings.Builder
	require.NoError(t, WriteTTFTPlot(&wide, []*Run{run("no cache", 5000, 40000), run("cache", 150, 200)}, "wide"))
	assert.Contains(t, wide.String(), "TTFT (ms, log scale)")
	for _, decade := range []string{">100<", ">1000<", ">10000<", ">100000<"} {
		assert.Contains(t, wide.String(), decade, "a tick per decade from 100 to 100000 ms")
	}
	require.NoError(t, WriteTTFTPlot(&narrow, []*Run{run("a", 100, 400), run("b", 150, 200)}, "narrow"))
	assert.NotContains(t, narrow.String(), "log scale")
}

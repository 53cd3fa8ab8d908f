package metrics

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// svgDoc is what the tests read back from a plot.
type svgDoc struct {
	els   []xml.StartElement
	texts []svgText // every <text>, in document order
}

type svgText struct {
	x    float64
	text string
}

// parseSVG decodes doc fully, failing the test on malformed XML.
func parseSVG(t *testing.T, doc []byte) svgDoc {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var d svgDoc
	var inText *svgText
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			require.NotEmpty(t, d.els)
			assert.Equal(t, "svg", d.els[0].Name.Local)
			return d
		}
		require.NoError(t, err, "SVG is not well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			d.els = append(d.els, tok.Copy())
			if tok.Name.Local == "text" {
				x, _ := strconv.ParseFloat(attr(tok, "x"), 64)
				inText = &svgText{x: x}
			}
		case xml.CharData:
			if inText != nil {
				inText.text += string(tok)
			}
		case xml.EndElement:
			if tok.Name.Local == "text" && inText != nil {
				d.texts = append(d.texts, *inText)
				inText = nil
			}
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

func (d svgDoc) text(s string) (svgText, bool) {
	for _, t := range d.texts {
		if t.text == s {
			return t, true
		}
	}
	return svgText{}, false
}

func hex(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

var strokeColor = regexp.MustCompile(`stroke:(#[0-9A-F]{6})`)

// seriesColors returns the palette colours the document strokes with,
// sorted: one per run, from its line or its legend entry.
func (d svgDoc) seriesColors() []string {
	var pal []string
	for _, c := range palette {
		pal = append(pal, hex(c))
	}
	var have []string
	for _, e := range d.els {
		if e.Name.Local != "path" {
			continue
		}
		for _, m := range strokeColor.FindAllStringSubmatch(attr(e, "style"), -1) {
			if slices.Contains(pal, m[1]) && !slices.Contains(have, m[1]) {
				have = append(have, m[1])
			}
		}
	}
	slices.Sort(have)
	return have
}

// isNumber tells tick labels (numbers, maybe with thousands separators)
// from names.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return err == nil
}

// assertLegendRight checks that each name is drawn right of every tick
// label, which all sit inside or beside the data: the legend is outside.
func assertLegendRight(t *testing.T, d svgDoc, names ...string) {
	t.Helper()
	rightmostTick := 0.0
	for _, tx := range d.texts {
		if isNumber(tx.text) {
			rightmostTick = max(rightmostTick, tx.x)
		}
	}
	for _, n := range names {
		tx, ok := d.text(n)
		if assert.True(t, ok, "no %q in the legend", n) {
			assert.Greater(t, tx.x, rightmostTick, "%q is not right of the data", n)
		}
	}
}

func ttftRun(name string, ttftMS ...int) *Run {
	r := &Run{Name: name}
	for i, ms := range ttftMS {
		at := time.Duration(ms) * time.Millisecond
		r.Requests = append(r.Requests, RequestRecord{ID: i, FirstToken: at, Finish: at, TokenTimes: []time.Duration{at}})
	}
	return r
}

type plotFunc struct {
	name  string
	write func(io.Writer, []*Run, string) error
}

var linePlots = []plotFunc{{"TTFT per request", WriteTTFTPlot}, {"TTFT CDF", WriteTTFTCDF}}

func TestTTFTPlotsOneSeriesPerRun(t *testing.T) {
	runs := sampleRuns() // the second run has a failed request
	runs[1].Name = `cached <&> "quoted"`
	runs = append(runs, ttftRun("third", 50, 60, 70))
	for _, pf := range linePlots {
		t.Run(pf.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, pf.write(&b, runs, "TTFT & friends"))
			d := parseSVG(t, b.Bytes())
			_, ok := d.text("TTFT & friends")
			assert.True(t, ok, "title")
			assertLegendRight(t, d, "baseline", `cached <&> "quoted"`, "third")
			want := []string{hex(palette[0]), hex(palette[1]), hex(palette[2])}
			slices.Sort(want)
			if diff := cmp.Diff(want, d.seriesColors()); diff != "" {
				t.Errorf("series colours (-want +have):\n%s", diff)
			}
			_, ok = d.text("TTFT (ms)")
			assert.True(t, ok, "a linear TTFT axis for 100-330 ms")
		})
	}
}

func TestTTFTPlotsDegenerate(t *testing.T) {
	tests := []struct {
		name string
		runs []*Run
	}{
		{"no runs", nil},
		{"empty run", []*Run{{Name: "empty"}}},
		{"only failures", []*Run{{Name: "f", Requests: []RequestRecord{{Err: "x"}}}}},
		{"no tokens beside a run with some", []*Run{{Name: "none", Requests: []RequestRecord{{ID: 0}}}, ttftRun("some", 0, 40)}},
		{"single request", []*Run{{Name: "one", Requests: []RequestRecord{record(0, 0, 1, 0, 5)}}}},
		{"zero TTFT on a log axis", []*Run{ttftRun("zero", 0, 1, 5000)}},
	}
	plots := append(slices.Clone(linePlots), plotFunc{"prefill", WritePrefillPlot})
	for _, tt := range tests {
		for _, pf := range plots {
			t.Run(tt.name+"/"+pf.name, func(t *testing.T) {
				var b bytes.Buffer
				require.NoError(t, pf.write(&b, tt.runs, "t"))
				d := parseSVG(t, b.Bytes())
				assert.NotContains(t, b.String(), "NaN")
				assert.NotContains(t, b.String(), "Inf")
				for _, r := range tt.runs {
					found := false
					for _, tx := range d.texts {
						found = found || strings.HasPrefix(tx.text, r.Name)
					}
					assert.True(t, found, "no label for %q", r.Name)
				}
			})
		}
	}
}

func TestTTFTPlotsUseALogAxisForWideRanges(t *testing.T) {
	for _, pf := range linePlots {
		t.Run(pf.name, func(t *testing.T) {
			var wide, narrow bytes.Buffer
			require.NoError(t, pf.write(&wide, []*Run{ttftRun("no cache", 5000, 40000), ttftRun("cache", 150, 200)}, "wide"))
			d := parseSVG(t, wide.Bytes())
			_, ok := d.text("TTFT (ms, log scale)")
			assert.True(t, ok, "axis title")
			for _, decade := range []string{"100", "1000", "10000", "100000"} {
				_, ok := d.text(decade)
				assert.True(t, ok, "a tick per decade from 100 to 100000 ms: no %s", decade)
			}
			require.NoError(t, pf.write(&narrow, []*Run{ttftRun("a", 100, 400), ttftRun("b", 150, 200)}, "narrow"))
			assert.NotContains(t, narrow.String(), "log scale", "400/100 is under the factor of 20")
		})
	}
}

func TestTTFTCDFStepsToTheShareOfAllRequests(t *testing.T) {
	r := ttftRun("r", 10, 20, 30)
	r.Requests = append(r.Requests, RequestRecord{ID: 3, Err: "boom"}) // 3 of 4 have a TTFT
	var b bytes.Buffer
	require.NoError(t, WriteTTFTCDF(&b, []*Run{r}, "t"))
	d := parseSVG(t, b.Bytes())
	for _, tick := range []string{"0", "50", "90", "99"} {
		_, ok := d.text(tick)
		assert.True(t, ok, "y tick %s", tick)
	}
	_, ok := d.text("requests with TTFT ≤ x (%)")
	assert.True(t, ok, "y axis title")
}

func prefillRun(name string, prefill int) *Run {
	r := &Run{Name: name, Engine: EngineStats{PrefillTokensComputed: prefill, BlockSize: 4}}
	// Two requests sharing 8 tokens, the second arriving later: the
	// optimum is 12 + 4 = 16 tokens (the second reuses two blocks).
	r.Requests = []RequestRecord{
		{ID: 0, Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Output: []int32{1}, TokenTimes: []time.Duration{1}, FirstToken: 1},
		{ID: 1, Arrival: time.Second, Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23}, Output: []int32{1}, TokenTimes: []time.Duration{time.Second + 1}, FirstToken: time.Second + 1},
	}
	return r
}

func TestPrefillPlot(t *testing.T) {
	runs := []*Run{prefillRun("baseline", 24), prefillRun("radix tree (prefix)", 16), prefillRun("hash + CoW (hashcow)", 20)}
	require.Equal(t, 16, OptimalPrefill(runs[0].Requests, 4))
	var b bytes.Buffer
	require.NoError(t, WritePrefillPlot(&b, runs, "prefill"))
	d := parseSVG(t, b.Bytes())
	for _, want := range []string{
		"baseline", "radix tree (prefix)", "hash + CoW (hashcow)",
		"24 (150.0 % of optimum)", "16 (100.0 % of optimum)", "20 (125.0 % of optimum)",
		"block-aligned optimum: 16",
	} {
		_, ok := d.text(want)
		assert.True(t, ok, "no text %q", want)
	}
	fills := 0
	for _, e := range d.els {
		if e.Name.Local == "path" {
			for i, c := range palette[:3] {
				if strings.Contains(attr(e, "style"), "fill:"+hex(c)) {
					fills |= 1 << i
				}
			}
		}
	}
	assert.Equal(t, 0b111, fills, "one bar in each run's colour")
	assertLegendRight(t, d, "block-aligned optimum: 16")

	// A run whose server did not say its block size has no optimum.
	runs[2].Engine.BlockSize = 0
	b.Reset()
	require.NoError(t, WritePrefillPlot(&b, runs, "prefill"))
	d = parseSVG(t, b.Bytes())
	_, ok := d.text("20")
	assert.True(t, ok, "the count alone, without an optimum")
	_, ok = d.text("block-aligned optimum")
	assert.True(t, ok, "marks per bar, and no single count, when the runs disagree")
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4817: "-4,817"} {
		assert.Equal(t, want, thousands(n))
	}
}

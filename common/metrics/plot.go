package metrics

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Plot geometry, in SVG user units. The right margin leaves room for the
// legend beside the plot so it never hides data.
const (
	plotW, plotH      = 860, 480
	marginL, marginR  = 70, 190
	marginT, marginB  = 40, 55
	plotInnerW        = plotW - marginL - marginR
	plotInnerH        = plotH - marginT - marginB
	targetTicks       = 6
	markerRadius      = 2.5
	legendLineLength  = 24
	legendRowSpacing  = 20
	axisLabelFontSize = 13
)

// palette is colour-blind friendly (Okabe–Ito) so comparisons stay readable
// for everyone; it cycles past eight runs.
var palette = []string{
	"#0072B2", "#D55E00", "#009E73", "#CC79A7",
	"#E69F00", "#56B4E9", "#000000", "#F0E442",
}

type point struct{ x, y float64 }

// WriteTTFTPlot draws TTFT in milliseconds (y) against request index (x), one
// coloured polyline with markers per run, as a standalone SVG document.
// Requests that failed or produced no token have no TTFT and are skipped, so
// a gap in the markers shows where they were. When the runs span more than
// a factor of 20 — a cache against no cache — the TTFT axis is logarithmic,
// or the fast runs would be a flat line at zero.
func WriteTTFTPlot(w io.Writer, runs []*Run, title string) error {
	series := make([][]point, len(runs))
	maxX, maxY := 1.0, 0.0
	for i, r := range runs {
		if r == nil {
			return fmt.Errorf("metrics: TTFT plot: run %d is nil", i)
		}
		maxX = max(maxX, float64(len(r.Requests)-1))
		for j, q := range r.Requests {
			if q.Failed() || len(q.TokenTimes) == 0 {
				continue
			}
			y := float64(q.FirstToken-q.Arrival) / float64(time.Millisecond)
			series[i] = append(series[i], point{float64(j), y})
			maxY = max(maxY, y)
		}
	}
	xStep := max(1, niceStep(maxX))
	xTop := math.Ceil(maxX/xStep) * xStep
	px := func(x float64) float64 { return marginL + x/xTop*plotInnerW }
	yAxis := newTTFTAxis(series2values(series), maxY)
	py := yAxis.pos

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-size="16">%s</text>`+"\n",
		marginL+plotInnerW/2, marginT/2+6, esc(title))

	b.WriteString(`<g class="axes" stroke="#888" stroke-width="1">` + "\n")
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", marginL, marginT+plotInnerH, marginL+plotInnerW, marginT+plotInnerH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", marginL, marginT, marginL, marginT+plotInnerH)
	b.WriteString("</g>\n")

	b.WriteString(`<g class="ticks" fill="#333">` + "\n")
	for k := 0; float64(k)*xStep <= xTop+xStep/2; k++ {
		x := float64(k) * xStep
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#888"/>`+"\n", px(x), marginT+plotInnerH, px(x), marginT+plotInnerH+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(x), marginT+plotInnerH+18, tickLabel(x, xStep))
	}
	for _, t := range yAxis.ticks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", marginL, py(t.v), marginL+plotInnerW, py(t.v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, py(t.v)+4, t.label)
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-size="%d">request index</text>`+"\n",
		marginL+plotInnerW/2, plotH-12, axisLabelFontSize)
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle" font-size="%d">%s</text>`+"\n",
		marginT+plotInnerH/2, axisLabelFontSize, yAxis.title)

	for i, pts := range series {
		color := palette[i%len(palette)]
		coords := make([]string, len(pts))
		for k, p := range pts {
			coords[k] = fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y))
		}
		fmt.Fprintf(&b, `<g class="series" data-run="%s" stroke="%s" fill="%s">`+"\n", esc(runs[i].Name), color, color)
		fmt.Fprintf(&b, `<polyline fill="none" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(coords, " "))
		for _, c := range coords {
			x, y, _ := strings.Cut(c, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%.1f"/>`+"\n", x, y, markerRadius)
		}
		b.WriteString("</g>\n")
	}

	b.WriteString(`<g class="legend">` + "\n")
	lx := marginL + plotInnerW + 20
	for i, r := range runs {
		color := palette[i%len(palette)]
		y := marginT + 10 + i*legendRowSpacing
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", lx, y, lx+legendLineLength, y, color)
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="%.1f" fill="%s"/>`+"\n", lx+legendLineLength/2, y, markerRadius, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+legendLineLength+6, y+4, esc(r.Name))
	}
	b.WriteString("</g>\n</svg>\n")

	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("metrics: TTFT plot: %w", err)
	}
	return nil
}

// niceStep picks a tick spacing of 1, 2 or 5 times a power of ten that splits
// [0, span] into about targetTicks intervals, the spacing people read fastest.
func niceStep(span float64) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / targetTicks
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*pow {
			return m * pow
		}
	}
	return 10 * pow
}

// tickLabel prints v with just enough decimals for the tick spacing, hiding
// floating-point residue such as 0.30000000000000004.
func tickLabel(v, step float64) string {
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// ttftAxis maps TTFT values to the plot's y coordinate.
type ttftAxis struct {
	pos   func(y float64) float64
	ticks []tick
	title string
}

type tick struct {
	v     float64
	label string
}

func series2values(series [][]point) []float64 {
	var ys []float64
	for _, s := range series {
		for _, p := range s {
			ys = append(ys, p.y)
		}
	}
	return ys
}

// newTTFTAxis picks a linear axis from 0, or a log axis over whole decades
// when the positive values span more than a factor of 20.
func newTTFTAxis(ys []float64, maxY float64) ttftAxis {
	minPos := math.Inf(1)
	for _, y := range ys {
		if y > 0 {
			minPos = min(minPos, y)
		}
	}
	if maxY > 0 && maxY/minPos > 20 {
		lo := math.Floor(math.Log10(minPos))
		hi := math.Ceil(math.Log10(maxY))
		a := ttftAxis{title: "TTFT (ms, log scale)"}
		a.pos = func(y float64) float64 {
			l := math.Log10(max(y, math.Pow(10, lo)))
			return marginT + plotInnerH - (l-lo)/(hi-lo)*plotInnerH
		}
		for d := lo; d <= hi; d++ {
			a.ticks = append(a.ticks, tick{math.Pow(10, d), strconv.FormatFloat(math.Pow(10, d), 'f', -1, 64)})
		}
		return a
	}
	step := niceStep(maxY)
	if maxY <= 0 {
		step = 1
	}
	top := max(step, math.Ceil(maxY/step)*step)
	a := ttftAxis{title: "TTFT (ms)"}
	a.pos = func(y float64) float64 { return marginT + plotInnerH - y/top*plotInnerH }
	for k := 0; float64(k)*step <= top+step/2; k++ {
		v := float64(k) * step
		a.ticks = append(a.ticks, tick{v, tickLabel(v, step)})
	}
	return a
}

package metrics

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot size in points. The legend takes its width out of the right side, so
// it never covers data.
const (
	plotWidth  vg.Length = 720
	plotHeight vg.Length = 405
	legendGap  vg.Length = 14
)

// logAxisRatio is how far apart the fastest and slowest TTFT may be before
// the TTFT axis turns logarithmic: a cache against no cache easily differs
// by 100×, and on a linear axis the fast runs would be a flat line at zero.
const logAxisRatio = 20

// palette is colour-blind friendly (Okabe–Ito) so comparisons stay readable
// for everyone; it cycles past eight runs. Run i has the same colour in
// every plot, so a reader who learnt it in one finds it in the next.
var palette = []color.Color{
	rgb(0x0072B2), rgb(0xD55E00), rgb(0x009E73), rgb(0xCC79A7),
	rgb(0xE69F00), rgb(0x56B4E9), rgb(0x000000), rgb(0xF0E442),
}

func rgb(v uint32) color.Color {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

var (
	gridColor = rgb(0xD8D8D8)
	axisColor = rgb(0x777777)
	sans      = font.Font{Typeface: "Liberation", Variant: "Sans"}
)

// ttftMS returns the request's TTFT in milliseconds, and false for a
// request that failed or produced no token and so has none.
func ttftMS(q RequestRecord) (float64, bool) {
	if q.Failed() || len(q.TokenTimes) == 0 {
		return 0, false
	}
	return float64(q.FirstToken-q.Arrival) / float64(time.Millisecond), true
}

// WriteTTFTPlot draws TTFT in milliseconds (y) against request index (x), one
// coloured line with markers per run, as a standalone SVG document.
// Requests that failed or produced no token have no TTFT and are skipped, so
// a gap in the markers shows where they were. When the runs span more than
// a factor of 20 the TTFT axis is logarithmic (see logAxisRatio).
func WriteTTFTPlot(w io.Writer, runs []*Run, title string) error {
	if err := checkRuns(runs, "TTFT plot"); err != nil {
		return err
	}
	series := make([]plotter.XYs, len(runs))
	var ys []float64
	maxX := 1.0
	for i, r := range runs {
		maxX = max(maxX, float64(len(r.Requests)-1))
		for j, q := range r.Requests {
			if y, ok := ttftMS(q); ok {
				series[i] = append(series[i], plotter.XY{X: float64(j), Y: y})
				ys = append(ys, y)
			}
		}
	}
	p := newPlot(title)
	p.X.Label.Text = "request index"
	p.X.Min, p.X.Max = 0, maxX
	clamp := ttftAxis(&p.Y, ys)
	lg := newLegend()
	for i, r := range runs {
		pts := series[i]
		for k := range pts {
			pts[k].Y = clamp(pts[k].Y)
		}
		line, dots, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("metrics: TTFT plot: %s: %w", r.Name, err)
		}
		line.Color, line.Width = palette[i%len(palette)], vg.Points(1.2)
		dots.Color, dots.Radius, dots.Shape = palette[i%len(palette)], vg.Points(2), draw.CircleGlyph{}
		if len(pts) > 0 {
			p.Add(line, dots)
		}
		lg.add(legendName(r.Name, len(pts)), line, dots)
	}
	return render(w, p, lg, "TTFT plot")
}

// WriteTTFTCDF draws, for each run, the share of its requests whose TTFT is
// at most x milliseconds: the empirical CDF, one step line per run on one
// chart. The y axis has grid lines at 50, 90 and 99 %, so the median and
// tail latencies read off where a line crosses them, and a line further
// left is a faster run throughout. The share is of all the run's requests:
// failed ones have no TTFT, are skipped, and keep the line below 100 %.
// The x axis is logarithmic under the same rule as WriteTTFTPlot's y axis.
func WriteTTFTCDF(w io.Writer, runs []*Run, title string) error {
	if err := checkRuns(runs, "TTFT CDF"); err != nil {
		return err
	}
	sorted := make([][]float64, len(runs))
	var all []float64
	for i, r := range runs {
		for _, q := range r.Requests {
			if v, ok := ttftMS(q); ok {
				sorted[i] = append(sorted[i], v)
			}
		}
		slices.Sort(sorted[i])
		all = append(all, sorted[i]...)
	}
	p := newPlot(title)
	clamp := ttftAxis(&p.X, all)
	p.Y.Label.Text = "requests with TTFT ≤ x (%)"
	p.Y.Min, p.Y.Max = 0, 100
	p.Y.Tick.Marker = plot.ConstantTicks{
		{Value: 0, Label: "0"}, {Value: 25, Label: "25"}, {Value: 50, Label: "50"},
		{Value: 75, Label: "75"}, {Value: 90, Label: "90"}, {Value: 99, Label: "99"}, {Value: 100},
	}
	lg := newLegend()
	for i, r := range runs {
		vals := sorted[i]
		var pts plotter.XYs
		if len(vals) > 0 {
			// Start on the x axis, then step up 1/n at every request.
			pts = append(pts, plotter.XY{X: clamp(vals[0]), Y: 0})
		}
		for k, v := range vals {
			pts = append(pts, plotter.XY{X: clamp(v), Y: 100 * float64(k+1) / float64(len(r.Requests))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("metrics: TTFT CDF: %s: %w", r.Name, err)
		}
		line.StepStyle = plotter.PostStep
		line.Color, line.Width = palette[i%len(palette)], vg.Points(1.8)
		if len(pts) > 0 {
			p.Add(line)
		}
		lg.add(legendName(r.Name, len(vals)), line)
	}
	return render(w, p, lg, "TTFT CDF")
}

// WritePrefillPlot draws the prompt tokens each run computed (its engine's
// PrefillTokensComputed) as one horizontal bar per run, first run on top,
// each labelled with its count and its share of the block-aligned optimum
// (see OptimalPrefill), which is marked by a dashed line across each bar: a
// bar ending on its mark wasted nothing, the baseline's bar shows what the
// cache saved. Runs without a block size (a server that did not say) have
// no optimum. Bars are used rather than points because the quantity is a
// total, and lengths from zero compare at a glance.
func WritePrefillPlot(w io.Writer, runs []*Run, title string) error {
	if err := checkRuns(runs, "prefill plot"); err != nil {
		return err
	}
	n := len(runs)
	optimum := make([]int, n)
	maxV := 1.0
	for i, r := range runs {
		if r.Engine.BlockSize > 0 && len(r.Requests) > 0 {
			optimum[i] = OptimalPrefill(r.Requests, r.Engine.BlockSize)
		}
		maxV = max(maxV, float64(r.Engine.PrefillTokensComputed), float64(optimum[i]))
	}

	p := newPlot(title)
	p.X.Label.Text = "prompt tokens computed"
	// Room right of the longest bar for its label.
	p.X.Min, p.X.Max = 0, maxV*1.3
	p.Y.Min, p.Y.Max = -0.5, float64(max(n, 1))-0.5
	// Each bar carries its name just above it rather than on an axis to its
	// left: a name then never collides with a bar, whatever the font a
	// viewer substitutes (see fallbackFonts) makes of its width.
	p.Y.Tick.Marker = plot.ConstantTicks{}
	p.Y.LineStyle.Width = 0
	p.Y.Padding = vg.Points(12)
	p.X.Tick.Marker = thousandsTicks{}
	p.Add(&plotter.Grid{Vertical: draw.LineStyle{Color: gridColor, Width: vg.Points(0.5)}})

	var names, counts plotter.XYLabels
	// Bar thickness is in points, not data units: half the height each run
	// has, the rest for its name, and never a slab.
	thick := min(vg.Points(32), (plotHeight-90)/vg.Length(max(n, 1))*0.5)
	lg := newLegend()
	for i, r := range runs {
		y := float64(n - 1 - i) // first run on top
		v := r.Engine.PrefillTokensComputed
		bar, err := plotter.NewBarChart(plotter.Values{float64(v)}, thick)
		if err != nil {
			return fmt.Errorf("metrics: prefill plot: %s: %w", r.Name, err)
		}
		bar.Horizontal, bar.XMin = true, y
		bar.Color, bar.LineStyle.Width = palette[i%len(palette)], 0
		p.Add(bar)
		label := thousands(v)
		if optimum[i] > 0 {
			label += fmt.Sprintf(" (%s %% of optimum)", strconv.FormatFloat(100*float64(v)/float64(optimum[i]), 'f', 1, 64))
		}
		counts.XYs = append(counts.XYs, plotter.XY{X: float64(v), Y: y})
		counts.Labels = append(counts.Labels, label)
		names.XYs = append(names.XYs, plotter.XY{X: 0, Y: y})
		names.Labels = append(names.Labels, r.Name)
	}
	if err := addLabels(p,
		textLabels{counts, 10, draw.XLeft, draw.YCenter, vg.Point{X: 5}},
		textLabels{names, 11, draw.XLeft, draw.YBottom, vg.Point{Y: thick/2 + 4}},
	); err != nil {
		return fmt.Errorf("metrics: prefill plot: %w", err)
	}

	// A mark across each bar at its optimum, rather than one line down the
	// chart, which would strike through the names; when the runs agree on
	// the optimum (the same requests and block size, as in a comparison)
	// the marks line up and the legend gives the count.
	dashed := draw.LineStyle{Color: color.Black, Width: vg.Points(1.5), Dashes: []vg.Length{3, 2}}
	var marks []plotter.XYs
	// From the top of the bar, where its name sits just above, to a little
	// below it; in data units, where one run has one unit of height.
	perPoint := float64(max(n, 1)) / float64(plotHeight-90)
	half, below := float64(thick)/2*perPoint, float64(thick)/2*perPoint+5*perPoint
	for i, o := range optimum {
		if o > 0 {
			y := float64(n - 1 - i)
			marks = append(marks, plotter.XYs{{X: float64(o), Y: y - below}, {X: float64(o), Y: y + half}})
		}
	}
	for _, m := range marks {
		line, err := plotter.NewLine(m)
		if err != nil {
			return fmt.Errorf("metrics: prefill plot: %w", err)
		}
		line.LineStyle = dashed
		p.Add(line)
	}
	if len(marks) > 0 {
		thumb, _ := plotter.NewLine(plotter.XYs{})
		thumb.LineStyle = dashed
		name := "block-aligned optimum"
		if optimum[0] > 0 && allEqual(optimum) {
			name += ": " + thousands(optimum[0])
		}
		lg.add(name, thumb)
	}
	return render(w, p, lg, "prefill plot")
}

func checkRuns(runs []*Run, what string) error {
	for i, r := range runs {
		if r == nil {
			return fmt.Errorf("metrics: %s: run %d is nil", what, i)
		}
	}
	return nil
}

func allEqual(v []int) bool {
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return true
}

// legendName is the run's name, saying so when it has nothing to draw so
// that a missing line does not look like a rendering fault.
func legendName(name string, points int) string {
	if points == 0 {
		return name + " (no TTFT)"
	}
	return name
}

// newPlot returns a plot with sans-serif text, light grid lines and grey
// axes, so that the data is the darkest thing on the page.
func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sans, 14)
	p.Title.Padding = vg.Points(10)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 12)
		a.Tick.Label.Font = font.From(sans, 10)
		a.LineStyle.Color = axisColor
		a.Tick.LineStyle.Color = axisColor
		a.Tick.Length = vg.Points(4)
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(grid)
	return p
}

// ttftAxis makes a a TTFT axis in milliseconds for the values vs: from 0,
// or over whole decades when the positive values span more than
// logAxisRatio. It returns what to apply to a value before plotting it,
// which lifts values a log axis cannot show (zero) onto its bottom edge.
func ttftAxis(a *plot.Axis, vs []float64) func(float64) float64 {
	minPos, maxV := math.Inf(1), 0.0
	for _, v := range vs {
		maxV = max(maxV, v)
		if v > 0 {
			minPos = min(minPos, v)
		}
	}
	if maxV > 0 && maxV/minPos > logAxisRatio {
		a.Label.Text = "TTFT (ms, log scale)"
		a.Scale = plot.LogScale{}
		a.Tick.Marker = plot.LogTicks{Prec: -1}
		a.Min = math.Pow(10, math.Floor(math.Log10(minPos)))
		a.Max = math.Pow(10, math.Ceil(math.Log10(maxV)))
		return func(v float64) float64 { return max(v, a.Min) }
	}
	a.Label.Text = "TTFT (ms)"
	a.Min, a.Max = 0, max(maxV, 1)
	return func(v float64) float64 { return v }
}

// thousandsTicks are gonum's default ticks with 12,345 for 12345.
type thousandsTicks struct{}

func (thousandsTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" && t.Value == math.Trunc(t.Value) && math.Abs(t.Value) < 1e15 {
			ticks[i].Label = thousands(int(t.Value))
		}
	}
	return ticks
}

// thousands prints n with a comma between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// legend is a plot.Legend that knows whether it has entries, which
// plot.Legend keeps to itself.
type legend struct {
	plot.Legend
	entries int
}

func newLegend() *legend {
	l := &legend{Legend: plot.NewLegend()}
	l.TextStyle.Font = font.From(sans, 11)
	l.Top, l.Left = true, true
	l.Padding = vg.Points(4)
	return l
}

func (l *legend) add(name string, thumbs ...plot.Thumbnailer) {
	l.Add(name, thumbs...)
	l.entries++
}

// render draws p, with lg in a column of its own to the right, as a
// standalone SVG document.
func render(w io.Writer, p *plot.Plot, lg *legend, what string) error {
	c := vgsvg.New(plotWidth, plotHeight)
	dc := draw.New(c)
	var legendW vg.Length
	if lg.entries > 0 {
		// A fifth more than measured: a viewer without Liberation Sans and
		// its metric twins (Arial, Helvetica) draws wider text.
		legendW = lg.Rectangle(dc).Size().X*1.2 + 2*legendGap
	}
	// The legend may take at most half the width; past that, long names
	// run off the right edge rather than squeeze the data to nothing.
	legendW = min(legendW, plotWidth/2)
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	if lg.entries > 0 {
		// Level with the top of the data, below the title.
		top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + vg.Points(4)
		lg.Draw(draw.Crop(dc, plotWidth-legendW+legendGap, 0, 0, -top))
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return fmt.Errorf("metrics: %s: %w", what, err)
	}
	if _, err := w.Write(fallbackFonts(b.Bytes())); err != nil {
		return fmt.Errorf("metrics: %s: %w", what, err)
	}
	return nil
}

// fallbackFonts names fonts to use where Liberation Sans is not installed.
// The SVG names only the font its text was measured with, and a viewer
// without it falls back to a serif face of other widths; Arial and
// Helvetica have Liberation Sans's metrics, so labels keep their place.
func fallbackFonts(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
}

// textLabels is one set of text labels for addLabels: at xy, in the sans
// font at size, aligned to their points and moved by offset.
type textLabels struct {
	xy     plotter.XYLabels
	size   vg.Length
	xAlign draw.XAlignment
	yAlign draw.YAlignment
	offset vg.Point
}

// addLabels adds to p each set of labels that has any.
func addLabels(p *plot.Plot, sets ...textLabels) error {
	for _, l := range sets {
		if len(l.xy.XYs) == 0 {
			continue
		}
		labels, err := plotter.NewLabels(l.xy)
		if err != nil {
			return err
		}
		for k := range labels.TextStyle {
			labels.TextStyle[k].Font = font.From(sans, l.size)
			labels.TextStyle[k].XAlign = l.xAlign
			labels.TextStyle[k].YAlign = l.yAlign
		}
		labels.Offset = l.offset
		p.Add(labels)
	}
	return nil
}

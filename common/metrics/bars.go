package metrics

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// BarSeries is one colour of a grouped bar chart: a value per group, and
// the label written above each bar ("" for none).
type BarSeries struct {
	Name   string
	Values []float64
	Labels []string
}

// WriteGroupedBars draws one group of vertical bars per entry of groups
// (named under the x axis), one bar per series in each group, side by side
// in the series' order and colour, each labelled above with its Labels
// entry, as a standalone SVG document. yLabel names the values' axis,
// which starts at zero. The experiments of phase 8 draw their results with
// it: prefill against two optima per block size, hit rate per eviction
// policy.
func WriteGroupedBars(w io.Writer, title, yLabel string, groups []string, series []BarSeries) error {
	if len(groups) == 0 || len(series) == 0 {
		return fmt.Errorf("metrics: bar chart: nothing to draw")
	}
	maxV := 1.0
	for _, s := range series {
		if len(s.Values) != len(groups) {
			return fmt.Errorf("metrics: bar chart: series %s has %d values for %d groups", s.Name, len(s.Values), len(groups))
		}
		for _, v := range s.Values {
			maxV = max(maxV, v)
		}
	}
	p := newPlot(title)
	p.Y.Label.Text = yLabel
	p.Y.Min, p.Y.Max = 0, maxV*1.15 // room above the tallest bar for its label
	p.Y.Tick.Marker = thousandsTicks{}
	p.NominalX(groups...)
	p.X.Tick.Label.Font = font.From(sans, 11)
	// Bars of a group share the width a group has, with a gap between groups.
	groupW := (plotWidth - 200) / vg.Length(len(groups))
	barW := min(vg.Points(48), groupW*0.8/vg.Length(len(series)))
	lg := newLegend()
	for i, s := range series {
		bars, err := plotter.NewBarChart(plotter.Values(s.Values), barW)
		if err != nil {
			return fmt.Errorf("metrics: bar chart: %s: %w", s.Name, err)
		}
		bars.Color, bars.LineStyle.Width = palette[i%len(palette)], 0
		bars.Offset = barW * (vg.Length(i) - vg.Length(len(series)-1)/2)
		p.Add(bars)
		lg.add(s.Name, bars)
		if len(s.Labels) == 0 {
			continue
		}
		var xy plotter.XYLabels
		for g, v := range s.Values {
			if g < len(s.Labels) && s.Labels[g] != "" {
				xy.XYs = append(xy.XYs, plotter.XY{X: float64(g), Y: v})
				xy.Labels = append(xy.Labels, s.Labels[g])
			}
		}
		if err := addLabels(p, textLabels{xy, 9, draw.XCenter, draw.YBottom, vg.Point{X: bars.Offset, Y: 3}}); err != nil {
			return fmt.Errorf("metrics: bar chart: %w", err)
		}
	}
	return render(w, p, lg, "bar chart")
}

// WriteBars draws one horizontal bar per name, first on top, its value's
// length from zero along an axis named xLabel, with the name just above
// the bar and labels[i] just right of its end, as a standalone SVG
// document. Long names (a design and its eviction policy) read better
// here than under a group.
func WriteBars(w io.Writer, title, xLabel string, names []string, values []float64, labels []string) error {
	n := len(names)
	if n == 0 || len(values) != n || len(labels) != n {
		return fmt.Errorf("metrics: bars: %d names, %d values, %d labels", n, len(values), len(labels))
	}
	maxV := 1.0
	for _, v := range values {
		maxV = max(maxV, v)
	}
	p := newPlot(title)
	p.X.Label.Text = xLabel
	p.X.Min, p.X.Max = 0, maxV*1.35 // room right of the longest bar for its label
	p.Y.Min, p.Y.Max = -0.5, float64(n)-0.5
	p.Y.Tick.Marker = plot.ConstantTicks{}
	p.Y.LineStyle.Width = 0
	p.Y.Padding = vg.Points(12)
	thick := min(vg.Points(24), (plotHeight-90)/vg.Length(n)*0.45)
	var ends, heads plotter.XYLabels
	for i, v := range values {
		y := float64(n - 1 - i)
		bar, err := plotter.NewBarChart(plotter.Values{v}, thick)
		if err != nil {
			return fmt.Errorf("metrics: bars: %s: %w", names[i], err)
		}
		bar.Horizontal, bar.XMin = true, y
		bar.Color, bar.LineStyle.Width = palette[i%len(palette)], 0
		p.Add(bar)
		ends.XYs = append(ends.XYs, plotter.XY{X: v, Y: y})
		ends.Labels = append(ends.Labels, labels[i])
		heads.XYs = append(heads.XYs, plotter.XY{X: 0, Y: y})
		heads.Labels = append(heads.Labels, names[i])
	}
	if err := addLabels(p,
		textLabels{ends, 10, draw.XLeft, draw.YCenter, vg.Point{X: 5}},
		textLabels{heads, 11, draw.XLeft, draw.YBottom, vg.Point{Y: thick/2 + 3}},
	); err != nil {
		return fmt.Errorf("metrics: bars: %w", err)
	}
	return render(w, p, newLegend(), "bars")
}

package trace

import (
	"bytes"
	"fmt"
	"html"
	"strings"

	"kvlab/common/kvcache"
)

// frame is one step as the figure draws it.
type frame struct {
	title  string
	events []string
	blocks []kvcache.BlockState
	dump   []string
}

// Record makes the Writer keep every step for Figure.
func (t *Writer) Record() { t.record = true }

func (t *Writer) keep(pool *kvcache.Pool) {
	f := frame{title: t.plan, events: append([]string(nil), t.lines...), blocks: pool.BlockStates()}
	if f.title == "" {
		f.title = "between steps:"
	}
	var d bytes.Buffer
	pool.Dump(&d, t.Name)
	f.dump = strings.Split(strings.TrimRight(d.String(), "\n"), "\n")
	t.frames = append(t.frames, f)
}

// Block colours: free, held by a sequence only, cached only, both.
const (
	colFree   = "#ffffff"
	colHeld   = "#9ecae1"
	colCached = "#a1d99b"
	colBoth   = "#fdd0a2"
)

func blockColour(b kvcache.BlockState) string {
	switch {
	case b.Refs == 0:
		return colFree
	case b.Held && b.Cached > 0:
		return colBoth
	case b.Held:
		return colHeld
	}
	return colCached
}

// Figure draws the recorded steps as an SVG figure sequence, one panel per
// step: the plan, the pool's blocks coloured by who holds them (with the
// allocator's count under each), the step's events, and the pool and cache
// as Dump draws them. title heads the figure.
func (t *Writer) Figure(title string) []byte {
	const (
		width = 760
		line  = 14
		cell  = 30
		gap   = 8
		pad   = 10
	)
	var body bytes.Buffer
	y := 44
	text := func(x, y int, class, s string) {
		// Leading spaces carry the tree's indentation: no-break spaces keep them.
		trimmed := strings.TrimLeft(s, " ")
		s = strings.Repeat("\u00a0", len(s)-len(trimmed)) + trimmed
		fmt.Fprintf(&body, "<text x=\"%d\" y=\"%d\" class=\"%s\" xml:space=\"preserve\">%s</text>\n", x, y, class, html.EscapeString(s))
	}
	for _, f := range t.frames {
		top := y
		y += 22
		text(pad+6, y, "h", f.title)
		y += 10
		for i, b := range f.blocks {
			x := pad + 6 + i*(cell+gap)
			fmt.Fprintf(&body, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#555\"/>\n", x, y, cell, cell, blockColour(b))
			text(x+cell/2, y+cell/2+4, "id", fmt.Sprint(i))
			text(x+cell/2, y+cell+12, "refs", fmt.Sprint(b.Refs))
		}
		y += cell + 16
		for _, e := range f.events {
			y += line
			text(pad+6, y, "ev", strings.TrimSpace(e))
		}
		if len(f.events) > 0 {
			y += 6
		}
		for _, d := range f.dump {
			y += line
			text(pad+6, y, "dump", d)
		}
		y += pad
		fmt.Fprintf(&body, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#bbb\"/>\n", pad, top+6, width-2*pad, y-top-6)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, y+pad, width, y+pad)
	out.WriteString(`<style>
text { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 11px; white-space: pre; }
.t { font-size: 13px; font-weight: bold; } .h { font-weight: bold; } .id { text-anchor: middle; } .refs { text-anchor: middle; font-size: 9px; fill: #444; } .ev { fill: #555; }
</style>
<rect width="100%" height="100%" fill="white"/>
`)
	fmt.Fprintf(&out, "<text x=\"%d\" y=\"20\" class=\"t\">%s</text>\n", pad, html.EscapeString(title))
	for _, l := range []struct {
		x    int
		c, s string
	}{{0, colFree, "free"}, {70, colHeld, "held by a sequence"}, {240, colCached, "cached"}, {320, colBoth, "held and cached"}} {
		x := pad + l.x
		fmt.Fprintf(&out, "<rect x=\"%d\" y=\"28\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#555\"/>\n", x, l.c)
		fmt.Fprintf(&out, "<text x=\"%d\" y=\"38\">%s</text>\n", x+16, l.s)
	}
	fmt.Fprintf(&out, "<text x=\"%d\" y=\"38\" class=\"ev\">under a block: its allocator count</text>\n", pad+480)
	out.Write(body.Bytes())
	out.WriteString("</svg>\n")
	return out.Bytes()
}

package metrics

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MissReasons are the reasons WriteMisses prints, in its order: the
// first four sum to the prompt tokens less the cached ones, preempted is
// recompute on top (common/kvcache/misses).
var MissReasons = []string{"cold", "evicted", "salt", "partial", "preempted"}

// WriteMisses prints, for each run that had a prefix cache, why its
// computed prompt tokens were not reused, in tokens, beside its prompt and
// cached tokens and, with tiers, the cached tokens each tier gave back
// (promoted, one count per tier). It prints nothing when no run had a
// cache.
func WriteMisses(w io.Writer, runs []*Run) {
	header := append(append([]string{"name"}, MissReasons...), "prompt", "cached")
	tiers := false
	for _, r := range runs {
		tiers = tiers || r.Engine.PromotedTokens != nil
	}
	if tiers {
		header = append(header, "promoted")
	}
	cells := [][]string{header}
	for _, r := range runs {
		e := r.Engine
		if e.MissTokens == nil {
			continue // no prefix cache: nothing could be reused
		}
		row := []string{r.Name}
		for _, name := range MissReasons {
			row = append(row, strconv.Itoa(e.MissTokens[name]))
		}
		row = append(row, strconv.Itoa(e.PromptTokens), strconv.Itoa(e.CachedTokens))
		if tiers {
			n := make([]string, len(e.PromotedTokens))
			for i, v := range e.PromotedTokens {
				n[i] = strconv.Itoa(v)
			}
			row = append(row, strings.Join(n, "/"))
		}
		cells = append(cells, row)
	}
	if len(cells) == 1 {
		return
	}
	fmt.Fprintln(w, "missed prompt tokens by reason (common/kvcache/misses): cold+evicted+salt+partial = prompt-cached,")
	fmt.Fprintln(w, "preempted is recomputed on top")
	writeCells(w, cells)
}

// WriteGhosts prints, for each run that ran ghosts, the real cache's hit
// rate and each ghost policy's on the same traffic, in percent. It prints
// nothing when no run had ghosts.
func WriteGhosts(w io.Writer, runs []*Run) {
	var cells [][]string
	for _, r := range runs {
		g := r.Engine.Ghosts
		if len(g) == 0 {
			continue
		}
		if cells == nil {
			header := []string{"name"}
			for _, c := range g {
				header = append(header, c.Name)
			}
			cells = append(cells, header)
		}
		row := []string{r.Name}
		for _, c := range g {
			row = append(row, strconv.FormatFloat(100*c.HitRate, 'f', 1, 64))
		}
		cells = append(cells, row)
	}
	if cells == nil {
		return
	}
	fmt.Fprintln(w, "ghost hit % on the same traffic, readmissions after preemption included (common/kvcache/ghost):")
	writeCells(w, cells)
}

// writeCells prints rows of cells in columns two spaces apart: the first
// left-aligned, the others right-aligned.
func writeCells(w io.Writer, cells [][]string) {
	var width []int
	for _, row := range cells {
		for i, v := range row {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	for _, row := range cells {
		var b strings.Builder
		for i, v := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(v))
			if i == 0 {
				b.WriteString(v + pad)
				continue
			}
			b.WriteString("  " + pad + v)
		}
		fmt.Fprintln(w, b.String())
	}
}

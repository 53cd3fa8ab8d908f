package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"kvlab/common/metrics"
	"kvlab/kernels/cpu"
)

// markdown lays rows out as a markdown table under header, each column
// padded to its widest cell (the first column left-aligned, the others
// right-aligned, as numbers read best).
func markdown(header []string, rows [][]string) string {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], len([]rune(c)))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string, sep bool) {
		b.WriteString("|")
		for i := range header {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			switch {
			case sep:
				dash := strings.Repeat("-", width[i])
				if i > 0 {
					dash = dash[:width[i]-1] + ":"
				}
				b.WriteString(" " + dash + " |")
			case i == 0:
				b.WriteString(" " + c + pad + " |")
			default:
				b.WriteString(" " + pad + c + " |")
			}
		}
		b.WriteString("\n")
	}
	line(header, false)
	line(nil, true)
	for _, r := range rows {
		line(r, false)
	}
	return b.String()
}

// commas writes n with thousands separators: 1,000.
func commas(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// num writes x with the digits its size needs: 1,234 / 123 / 12.3 / 1.23
// / 0.123.
func num(x float64) string {
	switch a := math.Abs(x); {
	case a == 0:
		return "0"
	case a >= 1000:
		return commas(int(math.Round(x)))
	case a >= 100:
		return fmt.Sprintf("%.0f", x)
	case a >= 10:
		return fmt.Sprintf("%.1f", x)
	case a >= 0.1:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

// spread writes the median of xs, and with more than one sample their
// range: "12.3 (11.9–13.0)".
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	s := num(medianF(xs))
	if lo, hi := num(slices.Min(xs)), num(slices.Max(xs)); lo != hi {
		s += fmt.Sprintf(" (%s–%s)", lo, hi)
	}
	return s
}

func secs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// pick maps the serving summaries to one figure each.
func pick(ss []metrics.Summary, f func(metrics.Summary) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// figuresTable is the table of what each server measured on each model
// alone: (a), (b) and (d); the serving runs have their own
// (servingTable).
func figuresTable(results []*result, o options) string {
	header := []string{"model", "server",
		fmt.Sprintf("(a) TTFT, cold %s tok, s", commas(o.prompt)), "(a) TTFT, cached, s", "(a) tok cached",
		"(b) decode tok/s", "(d) first answer, s", "(d) RSS, MiB"}
	var rows [][]string
	var notes []string
	for _, r := range results {
		for _, sd := range r.sides {
			s := r.s[sd.name]
			var starts, rss []float64
			for _, st := range s.starts {
				starts = append(starts, st.first.Seconds())
				rss = append(rss, st.rss)
			}
			hits := make([]float64, len(s.cachedHit))
			for i, h := range s.cachedHit {
				hits[i] = float64(h)
			}
			rows = append(rows, []string{r.m.name, sd.name,
				spread(secs(s.ttftCold)),
				spread(secs(s.ttftCached)), commas(int(medianF(hits))),
				spread(s.decode),
				spread(starts),
				spread(rss),
			})
		}
		if r.greedy != "" {
			notes = append(notes, fmt.Sprintf("%s: greedy tokens of the two servers on one 32-token prompt: %s.", r.m.name, r.greedy))
		}
	}
	out := markdown(header, rows)
	if len(notes) > 0 {
		out += "\n" + strings.Join(notes, "\n") + "\n"
	}
	return out
}

// servingTable is the table of (c): each server's serving runs on each
// model, one row a run, the run without a shared prefix beside the one
// with, and the runs under load after them.
func servingTable(results []*result, o options) string {
	header := []string{"model", "server", "(c) workload", fmt.Sprintf("out tok/s, %d×%d", o.requests, o.concurrency),
		"TTFT p50 / p99, s", "ITL p50, ms", "prompt tok computed", "tok cached"}
	var rows [][]string
	for _, r := range results {
		for _, sd := range r.sides {
			for _, k := range servingRuns(o.hogs) {
				rows = append(rows, servingRow(r.m.name, sd.name, k, r.s[sd.name].serving[k]))
			}
		}
	}
	prompts := fmt.Sprintf("%d system prompts", o.systems)
	if o.systems == 1 {
		prompts = "1 system prompt"
	}
	return markdown(header, rows) + fmt.Sprintf("\nShared prefix: %d requests over %s of %d tokens, then %d–%d tokens of their own; "+
		"no shared prefix: the same requests with each system prompt replaced by %d tokens of the request's own, its first token unlike any other request's. "+
		"%d output tokens each, %d in flight; prompt tok computed: prompt tokens less those the server found cached (medians of the rounds).\n",
		o.requests, prompts, o.systemLen, o.suffixMin, o.suffixMax, o.systemLen, o.output, o.concurrency)
}

// servingRow is one row of servingTable: run k of server on model, over
// the rounds' summaries ss.
func servingRow(model, server string, k servingRun, ss []metrics.Summary) []string {
	computed, cached := "–", "–"
	if len(ss) > 0 {
		c := medianF(pick(ss, func(x metrics.Summary) float64 { return float64(x.CachedTokens) }))
		computed = fmt.Sprintf("%s of %s", commas(ss[0].PromptTokens-int(c)), commas(ss[0].PromptTokens))
		cached = commas(int(c))
	}
	for _, x := range ss {
		// Cut at -run-limit: a rate or a percentile over the requests that
		// finished would flatter the server that stalled.
		if x.Failed > 0 {
			return []string{model, server, k.label(), fmt.Sprintf("cut at %s: %d of %d done", x.Wall.Round(time.Second), x.Completed, x.Requests),
				"–", "–", computed, cached}
		}
	}
	return []string{model, server, k.label(),
		spread(pick(ss, func(x metrics.Summary) float64 { return x.OutputTokensPerSec })),
		fmt.Sprintf("%s / %s", num(medianF(pick(ss, func(x metrics.Summary) float64 { return x.TTFT.P50.Seconds() }))),
			num(medianF(pick(ss, func(x metrics.Summary) float64 { return x.TTFT.P99.Seconds() })))),
		num(medianF(pick(ss, func(x metrics.Summary) float64 { return ms(x.ITL.P50) }))),
		computed, cached,
	}
}

// bound is the arithmetic behind one server's figures on one model.
type bound struct {
	prefillFLOPs float64 // of the cold prompt
	prefillRate  float64 // FLOP/s achieved
	decodeBytes  float64 // read per decode token
	decodeRate   float64 // bytes/s achieved
	serveEst     float64 // s: the serving run's work at the single-request rates
	stepTime     float64 // s: one decode step of the serving run, estimated
	serveWall    float64 // s: measured
	computed     int     // serving: prompt tokens computed (not cached)
	steps        int     // serving: decode steps, at concurrency per step
}

// bounds computes b for one server's sample on model r, whose KV cache
// holds kvElem-byte elements.
func bounds(r *result, s *sample, o options, kvElem float64) bound {
	cfg, _ := r.m.opts.Config()
	var b bound
	b.prefillFLOPs = prefillFLOPs(cfg, o.prompt)
	if t := medianDur(s.ttftCold).Seconds(); t > 0 {
		b.prefillRate = b.prefillFLOPs / t
	}
	b.decodeBytes = decodeBytes(cfg, dtypeSize(r.m.opts.DType), kvElem, o.prompt, o.decode)
	dec := medianF(s.decode)
	b.decodeRate = b.decodeBytes * dec
	if shared := s.serving[servingRun{shared: true}]; len(shared) > 0 {
		sv := shared[0]
		b.computed = sv.PromptTokens - int(medianF(pick(shared, func(x metrics.Summary) float64 { return float64(x.CachedTokens) })))
		b.steps = (sv.OutputTokens + o.concurrency - 1) / o.concurrency
		b.serveWall = medianF(pick(shared, func(x metrics.Summary) float64 { return x.Wall.Seconds() }))
		if dec > 0 && b.prefillRate > 0 {
			// A step of conc rows reads the weights once, as a single
			// decode does, and computes conc rows of products, as a
			// prefill does: whichever takes longer.
			perRow := 2 * (float64(layerParams(cfg)*int64(cfg.NumHiddenLayers)) + float64(headParams(cfg)))
			b.stepTime = max(1/dec, float64(o.concurrency)*perRow/b.prefillRate)
			b.serveEst = float64(b.computed)*medianDur(s.ttftCold).Seconds()/float64(o.prompt) + float64(b.steps)*b.stepTime
		}
	}
	return b
}

// peakFor is the GFLOP/s that sd's prefill on a dtype checkpoint is
// measured against: the bf16 products' peak where it multiplies bf16 by
// bf16 (multipliesInBF16, on a CPU that has the bf16 dot product or not:
// native) and that peak is known, else the float32 products' (0: unknown).
func peakFor(o options, dtype string, sd side, native bool) float64 {
	if multipliesInBF16(sd, dtype, native) && o.peakBF16 > 0 {
		return o.peakBF16
	}
	return o.peakGFLOPs
}

// boundsTable is the table of what bounds each figure.
func boundsTable(results []*result, o options, copyBW, readBW float64) string {
	header := []string{"model", "server", fmt.Sprintf("prefill: GFLOP in %s tok", commas(o.prompt)), "GFLOP/s", "of peak",
		"decode: MB read a token", "GB/s", "of copy", "of read", "serving: prompt tok computed", "decode steps", "s a step", "est. s", "measured s"}
	var rows [][]string
	for _, r := range results {
		for _, sd := range r.sides {
			b := bounds(r, r.s[sd.name], o, kvSize(kvDType(sd)))
			peak := "–"
			if p := peakFor(o, r.m.opts.DType, sd, cpu.BF16DotNative()); p > 0 {
				peak = fmt.Sprintf("%.0f %%", 100*b.prefillRate/1e9/p)
			}
			rows = append(rows, []string{r.m.name, sd.name,
				num(b.prefillFLOPs / 1e9), num(b.prefillRate / 1e9), peak,
				num(b.decodeBytes / 1e6), num(b.decodeRate / 1e9), fmt.Sprintf("%.0f %%", 100*b.decodeRate/copyBW),
				fmt.Sprintf("%.0f %%", 100*b.decodeRate/readBW),
				commas(b.computed), commas(b.steps), num(b.stepTime), num(b.serveEst), num(b.serveWall)})
		}
	}
	return markdown(header, rows) + fmt.Sprintf(
		"\nPrefill: 2 FLOPs per projection weight per token, the LM head once, attention 4·heads·head_dim per (query, visible key); "+
			"of peak: against -peak-gflops, or -peak-gflops-bf16 where the server multiplies bf16 weights in bf16. "+
			"Decode: every projection weight and the LM head at the checkpoint's dtype, plus the KV the layers see, averaged over the %d steps after the %s-token prompt; "+
			"copy bandwidth %.1f GB/s (read + written), read bandwidth %.1f GB/s (a scan that only reads, as decode does). Serving (the shared-prefix run) est.: the prompt tokens computed at the cold prefill's rate, "+
			"plus one decode step per %d output tokens, each the longer of a single-stream decode step (the weights read once) "+
			"and %d rows of products at the prefill's FLOP rate.\n", o.decode, commas(o.prompt), copyBW/1e9, readBW/1e9, o.concurrency, o.concurrency)
}

package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"kvlab/common/engine"
	"kvlab/common/metrics"
	"kvlab/common/workload"
)

// runChunking is the chunking command (docs/phase07.md, "Chunked prefill,
// measured"): the chunked_prefill workload served with whole-prompt
// prefill and with chunked prefill at each step budget of -budgets, and,
// for a variant with a prefix cache, each chunked budget once more with
// the cache. It prints one table of what chunking is for: the TTFT of the
// long prompts and of the short requests queued behind them, and the gaps
// between the tokens of the requests that were decoding meanwhile.
//
// The times are measured: by default on the CPU clock (cpuClock), each
// step counted at the CPU time it took on one core, which other work on
// the machine does not move; -clock wall takes the wall clock instead. A
// virtual step clock, which charges a 4,096-token step like a one-token
// one, is refused: that difference is the whole subject.
func runChunking(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "chunking", stderr)
	rf := &runtimeFlags{}
	rf.register(fs, v)
	sf := &servingFlags{}
	sf.register(fs, []string{"-workload", "chunked_prefill"}, "")
	budgets := fs.String("budgets", "256,512,2048", "the step budgets (-max-batch-tokens) of the chunked rows, comma-separated")
	whole := fs.Bool("whole", true, "add the whole-prompt row (-chunked-prefill=false), whose budget is the context (-max-context), the least whole-prompt prefill accepts")
	after := fs.Int("long-after", -1, "the long prompts arrive after this many short requests, and the rest of the short requests behind them (-1: half of -requests)")
	shared := fs.Int("long-shared", 3072, "the long prompts share their first this many tokens, as prompts quoting one document do, so that a prefix cache has something to find (0: all distinct)")
	runs := fs.Int("runs", 3, "serve every configuration this many times, in turns, and report each number's median")
	fs.Lookup("plot").Usage = "write an SVG plot of each configuration's TTFT distribution (its first run) to this file (empty: none)"
	fs.Lookup("wide").Usage = "add the engine steps, the prompt tokens computed and the preemptions of each configuration's first run"
	fs.Lookup("clock").Usage = "cpu: every engine step advances the clock by the CPU time it took, on one core (GOMAXPROCS=1), so other work on the machine moves no number; wall: the wall clock, on every core (a step clock is refused: it charges a 4,096-token step like a one-token one)"
	sf.clock = "cpu"
	for _, name := range []string{"max-batch-tokens", "chunked-prefill"} {
		fs.Lookup(name).Usage = "not taken here: every row sets its own (-budgets, -whole)"
	}
	// Room for a 4,096-token prompt and its 512 output tokens, and the
	// whole-prompt row's budget: the engine wants it to cover the context.
	rf.eng.MaxContext = 8192
	// Four long prompts and their outputs take 1,152 blocks: a pool that
	// holds them and the short requests leaves preemption out of the times.
	rf.eng.NumBlocks = 2048
	if err := parseExperiment(fs, rf, sf, args); err != nil {
		return err
	}
	var bad error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "max-batch-tokens", "chunked-prefill":
			bad = fmt.Errorf("-%s: every row sets its own; use -budgets and -whole", f.Name)
		}
	})
	if bad != nil {
		return bad
	}
	newClock := func() workload.Clock { return nil } // the wall clock
	switch {
	case sf.clock == "cpu":
		if !cpuClockAvailable {
			return fmt.Errorf("-clock cpu: this system has no getrusage to read the CPU time from; use -clock wall")
		}
		// Before the model loads: the backend sizes its workers by it.
		defer oneCore()()
		newClock = func() workload.Clock { return newCPUClock() }
	case strings.HasPrefix(sf.clock, "step:"):
		return fmt.Errorf("-clock %s: a step clock charges a prefill step of thousands of tokens like a one-token decode step, and that difference is what chunked prefill is about: use -clock cpu or wall", sf.clock)
	case sf.clock != "wall":
		return fmt.Errorf("-clock %q: want cpu or wall", sf.clock)
	}
	if *runs < 1 {
		return fmt.Errorf("-runs: want at least 1, have %d", *runs)
	}
	var sizes []int
	for _, f := range strings.Split(*budgets, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-budgets: %q is not a positive token budget", f)
		}
		sizes = append(sizes, n)
	}
	p := sf.params
	if *after < 0 {
		*after = p.Requests / 2
	}
	if *after > p.Requests {
		return fmt.Errorf("-long-after %d: there are only %d short requests (-requests)", *after, p.Requests)
	}
	m, reqs, err := sf.load(rf)
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	if err := shapeChunked(reqs, p, *after, *shared); err != nil {
		return err
	}

	type row struct {
		prefill, budget, cache string
		cfg                    engine.Config
	}
	var rows []row
	var refused string
	if *whole {
		base, err := rf.engineConfig(Variant{})
		if err != nil {
			return err
		}
		base.ChunkedPrefill = false
		base.MaxBatchTokens = base.ContextLimit(m.Config.MaxPositionEmbeddings)
		rows = append(rows, row{"whole prompt", strconv.Itoa(base.MaxBatchTokens), "no", base})
		if v.PrefixCache != nil && !rf.noCache {
			// The engine's own check, not a rule of this command's.
			c := base
			c.PrefixCache = v.PrefixCache
			if c.Validate(m.Config.MaxPositionEmbeddings) != nil {
				refused = fmt.Sprintf("whole prompt with the %s cache: refused by the engine (common/engine/config.go:Config.Validate):\n"+
					"  whole-prompt prefill attends only to the prompt's own keys and values, never the cache's", v.Name)
			}
		}
	}
	for _, b := range sizes {
		base, err := rf.engineConfig(Variant{})
		if err != nil {
			return err
		}
		base.ChunkedPrefill, base.MaxBatchTokens = true, b
		rows = append(rows, row{"chunked", strconv.Itoa(b), "no", base})
		if v.PrefixCache != nil {
			c, err := rf.engineConfig(v)
			if err != nil {
				return err
			}
			if c.PrefixCache != nil {
				c.ChunkedPrefill, c.MaxBatchTokens = true, b
				rows = append(rows, row{"chunked", strconv.Itoa(b), "yes", c})
			}
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("-budgets and -whole: no configuration to run")
	}

	configs := make([]namedConfig, len(rows))
	for i, r := range rows {
		configs[i] = namedConfig{fmt.Sprintf("%s, budget %s, cache %s", r.prefill, r.budget, r.cache), r.cfg}
	}
	// Turns rather than one configuration's runs back to back, so that a
	// spell of load from elsewhere on the machine spreads over them all.
	all := make([][]*metrics.Run, len(rows))
	var flat []*metrics.Run
	for k := range *runs {
		got, err := runNumbered(m, configs, sf.name, reqs, newClock, sf.progress(stderr), stderr, k*len(configs), *runs*len(configs))
		if err != nil {
			return err
		}
		for i, r := range got {
			if s := r.Summary(); s.Failed > 0 {
				return fmt.Errorf("%s: %d of %d requests failed: %s", r.Name, s.Failed, s.Requests, strings.Join(failureReasons(r), "; "))
			}
			all[i] = append(all[i], r)
		}
		flat = append(flat, got...)
	}
	if err := sameOutputs(flat); err != nil {
		return err
	}

	head := []string{"prefill", "budget", "cache", "behind p50", "behind p99", "long p50", "long p99", "ITL p50", "ITL p99", "run ITL p99", "hit %"}
	if sf.wide {
		head = append(head, "ITL max", "steps", "prefill tok", "preempted")
	}
	cells := [][]string{head}
	for i, r := range rows {
		ts := make([]chunkTimes, len(all[i]))
		for k, run := range all[i] {
			ts[k] = chunkedTimes(run, p.Requests, reqs[p.Requests].Arrival)
		}
		med := medianTimes(ts)
		s := all[i][0].Summary()
		line := []string{r.prefill, r.budget, r.cache,
			msOf(med.behind.P50), msOf(med.behind.P99), msOf(med.long.P50), msOf(med.long.P99),
			msOf(med.during.P50), msOf(med.during.P99), msOf(med.all.P99), pct(s.HitRate)}
		if sf.wide {
			line = append(line, msOf(med.during.Max), strconv.Itoa(all[i][0].Engine.Steps), strconv.Itoa(s.PrefillTokensComputed), strconv.Itoa(s.Preemptions))
		}
		cells = append(cells, line)
	}
	writeCells(stdout, cells, 0, 2)
	if refused != "" {
		fmt.Fprintln(stdout, refused)
	}
	fmt.Fprintf(stdout, "%s (%s prompt tokens, %s output tokens), %g a second;\n",
		count(p.Requests, "short request"), span(p.SuffixMin, p.SuffixMax), span(p.OutputMin, p.OutputMax), p.RPS)
	fmt.Fprintf(stdout, "after the first %d, %s of %d tokens", *after, count(len(reqs)-p.Requests, "long prompt"), len(reqs[p.Requests].Prompt))
	if *shared > 0 && len(reqs)-p.Requests > 1 {
		fmt.Fprintf(stdout, ", whose first %d tokens are the same", *shared)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "behind: TTFT of the short requests that arrived after the first long prompt; long: TTFT of the long prompts")
	fmt.Fprintln(stdout, "ITL: gaps between the short requests' tokens while the long prompts were prefilled (first arrival to last first token)")
	fmt.Fprintln(stdout, "run ITL: every gap between the short requests' tokens, pooled over the whole run, as a serving table reports it")
	if v.PrefixCache != nil {
		fmt.Fprintf(stdout, "cache: %s's prefix cache\n", v.Name)
	}
	times := "times: wall clock, measured on this machine, ms"
	if sf.clock == "cpu" {
		times = "times: CPU time of every engine step on one core (-clock cpu), measured on this machine, ms"
	}
	if *runs == 1 {
		fmt.Fprintf(stdout, "%s; one run\n", times)
	} else {
		fmt.Fprintf(stdout, "%s; each the median of %d runs\n", times, *runs)
	}
	fmt.Fprintf(stdout, "outputs: every configuration generated exactly the same tokens for all %d requests\n", len(reqs))
	if sf.jsonPath != "" {
		if err := writeFile(sf.jsonPath, func(w io.Writer) error { return metrics.WriteJSON(w, flat) }); err != nil {
			return err
		}
	}
	if sf.plotPath != "" {
		firsts := make([]*metrics.Run, len(all))
		for i := range all {
			firsts[i] = all[i][0]
		}
		title := fmt.Sprintf("TTFT distribution, chunked_prefill (%d requests), whole-prompt and chunked prefill", len(reqs))
		return sf.writePlot(stdout, func(w io.Writer) error { return metrics.WriteTTFTCDF(w, firsts, title) })
	}
	return nil
}

// shapeChunked reshapes the chunked_prefill workload's requests in place
// for runChunking. The workload sends its long prompts after every short
// one; here they arrive after the first after short requests, in their
// place on the same arrival grid, so that the other short requests queue
// behind them. With shared > 0, every long prompt starts with the first
// long prompt's first shared tokens: a prefix cache then has something to
// reuse, which a workload of distinct prompts never gives it.
func shapeChunked(reqs []workload.Request, p workload.Params, after, shared int) error {
	short, long := p.Requests, len(reqs)-p.Requests
	if long == 0 {
		return fmt.Errorf("-long-prompts: the chunked_prefill workload needs at least one long prompt here")
	}
	if n := len(reqs[short].Prompt); shared >= n {
		return fmt.Errorf("-long-shared %d: must be shorter than the long prompts (%d tokens), so that each still has tokens of its own", shared, n)
	}
	at := func(slot int) time.Duration { return time.Duration(float64(slot) * float64(time.Second) / p.RPS) }
	for i := range reqs {
		slot := i
		switch {
		case i >= short: // long prompt i-short
			slot = after + i - short
		case i >= after:
			slot = i + long
		}
		reqs[i].Arrival = at(slot)
	}
	if shared > 0 {
		first := reqs[short].Prompt
		for i := short + 1; i < len(reqs); i++ {
			copy(reqs[i].Prompt[:shared], first[:shared])
		}
	}
	return nil
}

// count is "1 long prompt", "4 long prompts".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// span is "16–64", or "2" for a range of one value.
func span(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "–" + strconv.Itoa(hi)
}

// chunkTimes are the numbers one run of runChunking reports.
type chunkTimes struct {
	// behind is the TTFT of the short requests that arrived after the
	// first long prompt, long that of the long prompts.
	behind, long metrics.Stats
	// during pools the gaps between consecutive tokens of the short
	// requests that ended while the long prompts were being prefilled,
	// from the first one's arrival to the last one's first token: the gaps
	// a long prefill sets. all pools every gap of the short requests, the
	// ITL a whole-run table reports.
	during, all metrics.Stats
}

// chunkedTimes reduces run: requests with an ID below short are the short
// ones, and firstLong is when the first long prompt arrived.
func chunkedTimes(run *metrics.Run, short int, firstLong time.Duration) chunkTimes {
	var behind, long, during, all []time.Duration
	var prefilled time.Duration // the last long prompt's first token
	for _, q := range run.Requests {
		if q.ID >= short && len(q.TokenTimes) > 0 {
			prefilled = max(prefilled, q.FirstToken)
		}
	}
	for _, q := range run.Requests {
		if q.Failed() || len(q.TokenTimes) == 0 {
			continue
		}
		ttft := q.FirstToken - q.Arrival
		switch {
		case q.ID >= short:
			long = append(long, ttft)
			continue
		case q.Arrival >= firstLong:
			behind = append(behind, ttft)
		}
		for i := 1; i < len(q.TokenTimes); i++ {
			gap := q.TokenTimes[i] - q.TokenTimes[i-1]
			all = append(all, gap)
			if at := q.TokenTimes[i]; at > firstLong && at <= prefilled {
				during = append(during, gap)
			}
		}
	}
	return chunkTimes{behind: metrics.NewStats(behind), long: metrics.NewStats(long), during: metrics.NewStats(during), all: metrics.NewStats(all)}
}

// medianTimes takes each number's median over the runs, number by number:
// the median of three p99s, not the p99 of three runs pooled, so that one
// run slowed by other work on the machine moves no number.
func medianTimes(ts []chunkTimes) chunkTimes {
	med := func(get func(chunkTimes) time.Duration) time.Duration {
		xs := make([]time.Duration, len(ts))
		for i, t := range ts {
			xs[i] = get(t)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	stats := func(get func(chunkTimes) metrics.Stats) metrics.Stats {
		return metrics.Stats{
			P50: med(func(t chunkTimes) time.Duration { return get(t).P50 }),
			P99: med(func(t chunkTimes) time.Duration { return get(t).P99 }),
			Max: med(func(t chunkTimes) time.Duration { return get(t).Max }),
		}
	}
	return chunkTimes{
		behind: stats(func(t chunkTimes) metrics.Stats { return t.behind }),
		long:   stats(func(t chunkTimes) metrics.Stats { return t.long }),
		during: stats(func(t chunkTimes) metrics.Stats { return t.during }),
		all:    stats(func(t chunkTimes) metrics.Stats { return t.all }),
	}
}

// writeCells prints a table, two spaces between columns: the columns
// left names (text) left-aligned, the others (numbers) right-aligned so
// that they compare digit by digit.
func writeCells(w io.Writer, cells [][]string, left ...int) {
	width := map[int]int{}
	for _, row := range cells {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, row := range cells {
		var line strings.Builder
		for i, c := range row {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if slices.Contains(left, i) {
				line.WriteString(c + pad)
			} else {
				line.WriteString(pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	fmt.Fprint(w, b.String())
}

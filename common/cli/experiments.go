package cli

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"kvlab/common/engine"
	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/workload"
)

// The lesson's three experiments (docs/phase08_experiments.md). Each holds
// everything but one setting fixed and prints one table and one plot:
//
//   - Alignment: the block size, on one shared prefix that is not a whole
//     number of blocks: what block-aligned reuse loses against token-level
//     reuse.
//   - Pressure: the design and its eviction policy, on several system
//     prompts and a pool too small to keep them all.
//   - Order: the admission order, first come first served against longest
//     cached prefix first, with and without a starvation guard.

// Alignment runs each variant at every block size of -block-sizes on the
// prefix_caching workload (by default 16 requests sharing a 1,000-token
// prefix) with the same KV pool in tokens, and compares the prompt tokens
// computed with the block-aligned and the token-level optimum. It fails
// unless the variants agree at each block size. It returns the exit code.
func Alignment(variants []Variant, args []string, stdout, stderr io.Writer) int {
	return exitCode(alignment(variants, args, stdout, stderr), stderr, "align")
}

// Pressure runs each variant (a design with one eviction policy) on the
// system_prompts workload with a pool too small for every system prompt,
// and compares hit rate in tokens and blocks evicted. It returns the exit
// code.
func Pressure(variants []Variant, args []string, stdout, stderr io.Writer) int {
	return exitCode(pressure(variants, args, stdout, stderr), stderr, "pressure")
}

// Order runs v on the system_prompts workload three times — first come
// first served, longest prefix first, and longest prefix first with a
// starvation guard — and compares hit rate and TTFT. It returns the exit
// code.
func Order(v Variant, args []string, stdout, stderr io.Writer) int {
	return exitCode(order(v, args, stdout, stderr), stderr, "order")
}

// experimentFlags sets up the flags every experiment shares: the engine's
// and the workload's, with the experiment's own workload and plot file.
// The caller sets its defaults on rf and sf, then parses.
func experimentFlags(name, usage, workloadName string, stderr io.Writer) (*flag.FlagSet, *runtimeFlags, *servingFlags) {
	fs := flag.NewFlagSet("phase08 "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "phase08 %s: %s\n\nUsage: phase08 %s [flags]\n\nFlags:\n", name, usage, name)
		fs.PrintDefaults()
	}
	rf := &runtimeFlags{}
	rf.register(fs, Variant{})
	sf := &servingFlags{}
	sf.register(fs, nil, "phase08")
	sf.name = workloadName
	sf.params = BenchDefaults(workloadName)
	// The plot is named by the experiment: its workload is fixed.
	sf.plotWhat = name
	sf.plotPath = filepath.Join("out", "phase08-MODEL-"+name+".svg")
	return fs, rf, sf
}

// parseExperiment parses args after the experiment has set its defaults
// on the flags' fields: the usage text shows those defaults, and -workload,
// which an experiment fixes, is refused. The plot's default is then named
// by the model (resolvePlot).
func parseExperiment(fs *flag.FlagSet, rf *runtimeFlags, sf *servingFlags, args []string) error {
	fs.VisitAll(func(f *flag.Flag) { f.DefValue = f.Value.String() })
	fs.Lookup("workload").DefValue = sf.name
	if err := parse(fs, args); err != nil {
		return err
	}
	sf.resolvePlot(fs, rf)
	var err error
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "workload" && f.Value.String() != sf.name {
			err = fmt.Errorf("-workload: this experiment runs %s only", sf.name)
		}
	})
	return err
}

// runChecked serves reqs once per configuration and checks that every
// configuration generated the first one's tokens.
func (sf *servingFlags) runChecked(m *model.Model, configs []namedConfig, reqs []workload.Request, stderr io.Writer) ([]*metrics.Run, error) {
	return sf.runCheckedNumbered(m, configs, reqs, stderr, 0, len(configs))
}

// runCheckedNumbered is runChecked for runs from+1… of total, for an
// experiment that calls it once per setting.
func (sf *servingFlags) runCheckedNumbered(m *model.Model, configs []namedConfig, reqs []workload.Request, stderr io.Writer, from, total int) ([]*metrics.Run, error) {
	newClock, err := workload.ParseClock(sf.clock)
	if err != nil {
		return nil, err
	}
	runs, err := runNumbered(m, configs, sf.name, reqs, newClock, sf.progress(stderr), stderr, from, total)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if s := r.Summary(); s.Failed > 0 {
			return nil, fmt.Errorf("%s: %d of %d requests failed: %s", r.Name, s.Failed, s.Requests, strings.Join(failureReasons(r), "; "))
		}
	}
	return runs, sameOutputs(runs)
}

// clockNote says which clock the times come from, under a table.
func (sf *servingFlags) clockNote() string {
	if sf.clock == "" || sf.clock == "wall" {
		return "times: wall clock, measured on this machine"
	}
	return fmt.Sprintf("times: virtual (-clock %s), not measured: every engine step counts as %s", sf.clock, strings.TrimPrefix(sf.clock, "step:"))
}

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) }

func msOf(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func alignment(variants []Variant, args []string, stdout, stderr io.Writer) error {
	fs, rf, sf := experimentFlags("align", "one shared prefix, three block sizes: prefill against the block-aligned and the token-level optimum", "prefix_caching", stderr)
	sizes := fs.String("block-sizes", "1,16,64", "block sizes to compare, comma-separated (-block-size and -blocks are ignored)")
	poolTokens := fs.Int("pool-tokens", 16384, "KV pool size in tokens at every block size (blocks = pool-tokens ÷ block size)")
	sf.params.Requests, sf.params.PrefixLen = 16, 1000
	if err := parseExperiment(fs, rf, sf, args); err != nil {
		return err
	}
	var blockSizes []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-block-sizes: %q is not a positive block size", f)
		}
		blockSizes = append(blockSizes, n)
	}
	m, reqs, err := sf.load(rf)
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "block size\tprefill tok\tblock-aligned optimum\ttoken-level optimum\tof block-aligned %\tof token-level %\thit %\t")
	var groups []string
	computed, blockOpt, tokenOpt := metrics.BarSeries{Name: "prompt tokens computed"}, metrics.BarSeries{Name: "block-aligned optimum"}, metrics.BarSeries{Name: "token-level optimum"}
	for bi, bs := range blockSizes {
		rf.eng.BlockSize, rf.eng.NumBlocks = bs, max(*poolTokens/bs, 1)
		base, err := rf.engineConfig(Variant{})
		if err != nil {
			return err
		}
		var configs []namedConfig
		for _, v := range variants {
			c := base
			c.PrefixCache = v.PrefixCache
			configs = append(configs, namedConfig{fmt.Sprintf("%s, block %d", v.Name, bs), c})
		}
		runs, err := sf.runCheckedNumbered(m, configs, reqs, stderr, bi*len(configs), len(blockSizes)*len(configs))
		if err != nil {
			return err
		}
		s := runs[0].Summary()
		for _, r := range runs[1:] {
			if o := r.Summary(); o.PrefillTokensComputed != s.PrefillTokensComputed || o.CachedTokens != s.CachedTokens {
				return fmt.Errorf("block size %d: %s computed %d prompt tokens and found %d cached, %s %d and %d; the designs should agree", bs, runs[0].Name, s.PrefillTokensComputed, s.CachedTokens, r.Name, o.PrefillTokensComputed, o.CachedTokens)
			}
		}
		blockBound := metrics.OptimalPrefill(runs[0].Requests, bs)
		tokenBound := metrics.OptimalPrefill(runs[0].Requests, 1)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", bs, s.PrefillTokensComputed, blockBound, tokenBound,
			pct(float64(s.PrefillTokensComputed)/float64(blockBound)), pct(float64(s.PrefillTokensComputed)/float64(tokenBound)), pct(s.HitRate))
		groups = append(groups, fmt.Sprintf("block size %d", bs))
		for _, b := range []struct {
			s *metrics.BarSeries
			v int
		}{{&computed, s.PrefillTokensComputed}, {&blockOpt, blockBound}, {&tokenOpt, tokenBound}} {
			b.s.Values = append(b.s.Values, float64(b.v))
			b.s.Labels = append(b.s.Labels, strconv.Itoa(b.v))
		}
	}
	tw.Flush()
	var names []string
	for _, v := range variants {
		names = append(names, v.Name)
	}
	writeNamed(stdout, "every row:", "computed the same prompt tokens and generated the same tokens", names)
	title := fmt.Sprintf("Prompt tokens computed, %d requests sharing a %d-token prefix", len(reqs), sf.params.PrefixLen)
	return sf.writePlot(stdout, func(w io.Writer) error {
		return metrics.WriteGroupedBars(w, title, "prompt tokens", groups, []metrics.BarSeries{computed, blockOpt, tokenOpt})
	})
}

func pressure(variants []Variant, args []string, stdout, stderr io.Writer) error {
	fs, rf, sf := experimentFlags("pressure", "several system prompts, a pool too small for all of them: hit rate and evictions per design and eviction policy", "system_prompts", stderr)
	setSystemPromptDefaults(sf)
	// Two arrivals a second leave the pool to the cache: no request waits
	// for room or is preempted, so hits differ only by what was evicted.
	// 96 blocks would hold the six system prompts alone, not with the
	// running requests and their tails.
	sf.params.RPS, rf.eng.NumBlocks = 2, 96
	roomy := fs.Int("roomy-blocks", 2048, "the pool of the reference row, large enough that nothing is evicted")
	if err := parseExperiment(fs, rf, sf, args); err != nil {
		return err
	}
	m, reqs, err := sf.load(rf)
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	base, err := rf.engineConfig(Variant{})
	if err != nil {
		return err
	}
	// The reference: the first variant in a pool that never evicts, the
	// most any policy could find.
	ref := base
	ref.PrefixCache, ref.NumBlocks = variants[0].PrefixCache, *roomy
	configs := []namedConfig{{fmt.Sprintf("no pressure (%s, %d blocks)", variants[0].Name, *roomy), ref}}
	for _, v := range variants {
		c := base
		c.PrefixCache = v.PrefixCache
		configs = append(configs, namedConfig{v.Name, c})
	}
	runs, err := sf.runChecked(m, configs, reqs, stderr)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design, eviction policy\thit %\tcached tok\tprefill tok\tevicted blocks\tpreemptions\t")
	hits := metrics.BarSeries{Name: "hit rate in tokens (%)"}
	var groups []string
	for _, r := range runs {
		s := r.Summary()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t\n", r.Name, pct(s.HitRate), s.CachedTokens, s.PrefillTokensComputed, s.Evictions, s.Preemptions)
		hits.Values = append(hits.Values, 100*s.HitRate)
		hits.Labels = append(hits.Labels, fmt.Sprintf("%s %% (%d evicted)", pct(s.HitRate), s.Evictions))
		groups = append(groups, r.Name)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d requests over %d system prompts of %d tokens (%d blocks each); pool %d blocks of %d tokens\n",
		len(reqs), workload.DefaultSystemPrompts, sf.params.PrefixLen, (sf.params.PrefixLen+rf.eng.BlockSize-1)/rf.eng.BlockSize, rf.eng.NumBlocks, rf.eng.BlockSize)
	fmt.Fprintf(stdout, "outputs: every configuration generated exactly the first one's tokens for all %d requests\n", len(reqs))
	title := fmt.Sprintf("Hit rate under memory pressure, %d system prompts, %d-block pool", workload.DefaultSystemPrompts, rf.eng.NumBlocks)
	return sf.writePlot(stdout, func(w io.Writer) error {
		return metrics.WriteBars(w, title, "prompt tokens found cached (%)", groups, hits.Values, hits.Labels)
	})
}

// setSystemPromptDefaults sizes the system_prompts workload for the
// pressure and order experiments: 96 requests over six system prompts of
// 256 tokens (16 blocks each, 96 for all six), short suffixes and outputs.
// Each experiment sets its own arrival rate and pool.
func setSystemPromptDefaults(sf *servingFlags) {
	sf.params.Requests, sf.params.PrefixLen = 96, 256
	sf.params.SuffixMin, sf.params.SuffixMax = 16, 64
	sf.params.OutputMin, sf.params.OutputMax = 8, 32
}

func order(v Variant, args []string, stdout, stderr io.Writer) error {
	fs, rf, sf := experimentFlags("order", "first come first served against longest prefix first, with and without a starvation guard, on the same arrivals", "system_prompts", stderr)
	setSystemPromptDefaults(sf)
	// Sixteen arrivals a second into a 128-block pool: requests queue,
	// and the order in which they are admitted decides which system
	// prompts stay cached.
	sf.params.RPS, rf.eng.NumBlocks = 16, 128
	guard := fs.Int("guard", 20, "the starvation guard of the third run: a request that has waited this many engine steps goes first (-order and -max-wait-steps are ignored)")
	if err := parseExperiment(fs, rf, sf, args); err != nil {
		return err
	}
	if *guard <= 0 {
		return fmt.Errorf("-guard: must be positive, have %d", *guard)
	}
	m, reqs, err := sf.load(rf)
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	base, err := rf.engineConfig(Variant{})
	if err != nil {
		return err
	}
	base.PrefixCache = v.PrefixCache
	fcfs, lpf, guarded := base, base, base
	fcfs.Order, fcfs.MaxWaitSteps = engine.OrderFCFS, 0
	lpf.Order, lpf.MaxWaitSteps = engine.OrderLongestPrefix, 0
	guarded.Order, guarded.MaxWaitSteps = engine.OrderLongestPrefix, *guard
	configs := []namedConfig{
		{"first come first served", fcfs},
		{"longest prefix first", lpf},
		{fmt.Sprintf("longest prefix first, guard %d steps", *guard), guarded},
	}
	runs, err := sf.runChecked(m, configs, reqs, stderr)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "admission order\thit %\tprefill tok\tevicted blocks\tTTFT p50 ms\tTTFT p99 ms\t")
	for _, r := range runs {
		s := r.Summary()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t\n", r.Name, pct(s.HitRate), s.PrefillTokensComputed, s.Evictions, msOf(s.TTFT.P50), msOf(s.TTFT.P99))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%s; %d requests over %d system prompts of %d tokens; pool %d blocks of %d tokens\n",
		v.Name, len(reqs), workload.DefaultSystemPrompts, sf.params.PrefixLen, rf.eng.NumBlocks, rf.eng.BlockSize)
	fmt.Fprintln(stdout, sf.clockNote())
	fmt.Fprintf(stdout, "outputs: every order generated exactly the same tokens for all %d requests\n", len(reqs))
	title := fmt.Sprintf("TTFT distribution by admission order, %s (%d requests)", sf.name, len(reqs))
	return sf.writePlot(stdout, func(w io.Writer) error { return metrics.WriteTTFTCDF(w, runs, title) })
}

// writePlot draws an experiment's plot into -plot's file, unless -plot is
// empty, and says where it went.
func (sf *servingFlags) writePlot(stdout io.Writer, draw func(io.Writer) error) error {
	if sf.plotPath == "" {
		return nil
	}
	if err := writeFile(sf.plotPath, draw); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nplot: %s\n", sf.plotPath)
	return nil
}

package cli

import (
	"fmt"
	"io"
	"strings"

	"kvlab/common/engine"
	"kvlab/common/kvcache/ghost"
	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/workload"
)

// BenchDefaults returns the workload parameters bench starts from: the
// workload's full-size parameters (the prefix_caching baseline takes about a
// minute on a 2-core CPU with the built-in model). Every value is a flag.
func BenchDefaults(name string) workload.Params {
	p := workload.DefaultParams(name)
	p.Vocab = 0 // filled in from the model
	return p
}

// workloadName finds the -workload flag's value before the flags are
// parsed, because each workload has its own defaults for the other flags.
func workloadName(args []string) string {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, "workload="); ok {
			return v
		}
		if a == "workload" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "prefix_caching"
}

func runBench(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "bench", stderr)
	var rf runtimeFlags
	rf.register(fs, v)
	rf.trace.register(fs, stderr)
	if v.PrefixCache != nil {
		rf.tiers.register(fs)
	}
	var sf servingFlags
	sf.register(fs, args, "")
	var compare, ghosts *bool
	if v.PrefixCache != nil {
		compare = fs.Bool("compare", false, "run the baseline (no cache) and the cache in one process on the same arrivals")
		ghosts = fs.Bool("ghosts", false, "run rival eviction policies (LRU, LFU, SLRU, ARC, TensorRT-LLM-style priority) as metadata-only ghost caches on the same traffic and print what each would have hit, under the table")
	}
	var hf httpFlags
	hf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if hf.url != "" {
		if compare != nil && *compare {
			return fmt.Errorf("-compare runs engines in this process; with -url, run bench once per server (or phase08 -servers)")
		}
		if rf.trace.on || rf.trace.dump {
			return fmt.Errorf("-trace traces an engine in this process, and with -url the engine is the server's: run bench without -url to trace one")
		}
		if err := sf.wallClockOnly("-url"); err != nil {
			return err
		}
		if ghosts != nil && *ghosts {
			return fmt.Errorf("-ghosts runs ghost caches beside an engine in this process; with -url, give -ghosts to serve and read its /metrics")
		}
		if rf.tiers.on() {
			return fmt.Errorf("%s %s an engine in this process, and with -url the engine is the server's: give %s to serve", rf.tiers.names(), rf.tiers.verb("tiers", "tier"), rf.tiers.verb("it", "them"))
		}
		return runBenchURL(hf, &rf, &sf, stdout, stderr)
	}
	if err := rf.checkTiers(v); err != nil {
		return err
	}
	stop, err := rf.startProfiles()
	if err != nil {
		return err
	}
	defer stop()
	m, reqs, err := sf.load(&rf)
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	cfg, err := rf.engineConfig(v)
	if err != nil {
		return err
	}
	base := cfg
	base.PrefixCache = nil
	dir, err := rf.dir()
	if err != nil {
		return err
	}
	// The cache's engine gets the tiers; benchOne verifies and shuts them
	// down around its run.
	tiers, err := rf.tiers.open(&cfg, dir, &m.Config, tierHasher, stderr, v.Name+" bench")
	if err != nil {
		return err
	}
	defer tiers.release()
	var board *ghost.Board
	if ghosts != nil && *ghosts {
		board = withGhosts(&cfg)
	}
	configs := []namedConfig{{v.Name, cfg}}
	boards := []*ghost.Board{board}
	if compare != nil && *compare {
		configs = []namedConfig{{"baseline", base}, {v.Name, cfg}}
		boards = []*ghost.Board{nil, board}
	}
	runs, err := sf.serveRuns(m, configs, reqs, stdout, stderr)
	if err != nil {
		return err
	}
	addGhosts(runs, boards)
	metrics.WriteMisses(stdout, runs)
	metrics.WriteGhosts(stdout, runs)
	return nil
}

// benchOne runs reqs through a fresh engine and returns the metrics. Cache
// tiers the flags built for cfg (tierFlags.open) are verified once the
// engine exists and shut down after the run, before the engine closes.
func benchOne(m *model.Model, cfg engine.Config, name string, reqs []workload.Request, clock workload.Clock, progress io.Writer) (*metrics.Run, error) {
	e, err := engine.New(m, cfg)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	tiers := tierSetOf(cfg.Tiers)
	if err := tiers.verify(e.Pool()); err != nil {
		return nil, err
	}
	d := &driven{e: e, cached: map[int]int{}}
	run, err := workload.Run(d, reqs, workload.RunOptions{Name: name, Progress: progress, Clock: clock})
	if err != nil {
		return nil, err
	}
	s := e.Stats()
	run.Engine = metrics.EngineStats{
		Steps:                 s.Steps,
		PrefillTokensComputed: s.PrefillTokens,
		DecodeTokens:          s.DecodeTokens,
		CachedTokens:          s.CachedTokens,
		PromptTokens:          s.QueriedTokens,
		PeakBlocksUsed:        s.PeakBlocks,
		TotalBlocks:           e.Pool().Allocator().Total(),
		BlockSize:             e.Pool().BlockSize(),
		BlockCopies:           e.Pool().Copies(),
		MaxRunning:            s.MaxRunning,
		Preemptions:           s.Preemptions,
		MissTokens:            missTokens(cfg, s),
		PromotedTokens:        d.promoted,
	}
	if c := e.Pool().Cache(); c != nil {
		run.Engine.Evictions = c.Stats().Evicted
	}
	if err := tiers.shutdown(e.Pool()); err != nil {
		return nil, err
	}
	return run, nil
}

// driven adapts the engine to the workload driver's interface.
type driven struct {
	e      *engine.Engine
	cached map[int]int
	buf    []workload.Token
	// promoted sums, per cache tier, the cached prompt tokens each gave
	// back, over the finished requests; nil without tiers.
	promoted []int
}

func (d *driven) Submit(id int, prompt []int32, maxTokens int) error {
	// Benchmarks want the output lengths they asked for.
	return d.e.Submit(engine.Request{ID: id, Prompt: prompt, MaxTokens: maxTokens, IgnoreEOS: true})
}

func (d *driven) Step() []workload.Token {
	d.buf = d.buf[:0]
	for _, o := range d.e.Step() {
		if o.Err == nil {
			d.cached[o.ID] = o.Cached
		}
		if o.Done && o.Sample == 0 && o.Promoted != nil {
			if d.promoted == nil {
				d.promoted = make([]int, len(o.Promoted))
			}
			for i, n := range o.Promoted {
				d.promoted[i] += n
			}
		}
		d.buf = append(d.buf, workload.Token{ID: o.ID, Token: o.Token, Done: o.Done, Err: o.Err})
	}
	return d.buf
}

func (d *driven) Busy() bool { return d.e.Busy() }

// CachedTokens reports the prompt tokens request id found in the prefix
// cache (workload.CacheReporter).
func (d *driven) CachedTokens(id int) int { return d.cached[id] }

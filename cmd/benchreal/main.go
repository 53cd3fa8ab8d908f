// Command benchreal serves synthetic checkpoints of real models' sizes —
// Llama-3.2-1B (bf16 and f32), Qwen3-0.6B and Gemma-3-1B (bf16) — with
// this project's serve and, given a llama.cpp build, with llama-server on
// the same weights, and measures both over HTTP the way a client sees
// them:
//
//	go run ./cmd/benchreal                                  # this engine alone
//	go run ./cmd/benchreal -llama-cpp DIR -rounds 3         # beside llama-server
//	go run ./cmd/benchreal -small                           # the same pipeline on small shapes
//
// Every other benchmark of the project runs models of 4–30 MB; these are
// 1.2–5 GB, so the weights come from memory, not the caches.
//
// For each model it writes the checkpoint (seeded random weights, reused
// when already written with the same options) and, with llama.cpp, its
// GGUF export (export-gguf), starts both servers, checks that they
// generate the same greedy tokens for one prompt, and then, for -rounds
// rounds, alternating the servers (serve, llama-server, serve,
// llama-server, ...) so that drift in the machine's load hits both:
//
//   - (a) TTFT of a cold -prompt-token prompt (new random ids each round,
//     the same for both servers), and of the same prompt sent again
//     (cached: the server finds its prefix in its cache);
//   - (b) decode tokens per second of the cold request's -decode tokens,
//     from its first token to its last;
//   - (c) a serving run: -requests requests over -system-prompts shared
//     system prompts of -system-len tokens (workload.SystemPrompts; a new
//     set each round), -concurrency at a time; output tokens per second,
//     TTFT p50 and p99, ITL p50, prompt tokens computed and found cached;
//     and beside it the same run with no shared prefix (each request's
//     system prompt its own: workload.go), which no cache can shorten;
//     with -hogs N, both once more beside N busy-looping processes
//     (hogs.go), rows "under load (N hogs)"; a run not done within
//     -run-limit is cut, and its row says how many requests finished;
//
// then stops them and (d) starts each -startup-runs times under
// cmd/benchstartup: exec to the first answer, and the RSS after it.
//
// Both servers are driven through POST /completion (client.go says why),
// greedy, with ignore_eos. The default rows run both servers as shipped,
// with only the flags that size them alike or make them do the same
// work (defaults.go lists each and why): serve gets GOMAXPROCS=-threads,
// -prefix-caching and -blocks -ctx/16; llama-server gets -t and -tb
// -threads, -c -ctx with -kvu (one KV cache shared by the slots, as
// serve's pool is) and -np -concurrency. The KV dtype, flash attention,
// serve's bf16 products and llama-server's sliding-window cache stay at
// each server's default. -serve-arg and -llama-arg add rows of their own,
// labelled with those arguments ("serve -bf16-dot=false"), measured
// beside the default rows, never in their place.
//
// Before measuring it samples /proc/stat for a second and warns, on
// stderr and in the markdown, when other processes keep more than half
// a core busy.
//
// The output is one markdown table of (a), (b) and (d) (medians over the
// rounds, min–max in parentheses), one of the serving runs, a row per
// server and run, and one of what bounds them: prefill against the
// -peak-gflops of `make bench-kernels` (-peak-gflops-bf16 for the rows
// that multiply in bf16), decode against the copy and read bandwidths
// measured here (bounds.go), the shared-prefix run against the time its
// work would take at the single-request rates.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/tokenizer"
	"kvlab/internal/benchrun"
)

// options are the command's flags.
type options struct {
	models      []string
	small       bool
	work        string
	binDir      string
	llamaDir    string
	threads     int
	rounds      int
	prompt      int
	decode      int
	requests    int
	concurrency int
	systems     int
	systemLen   int
	suffixMin   int
	suffixMax   int
	output      int
	startups    int
	ctx         int
	hogs        int
	runLimit    time.Duration
	peakGFLOPs  float64
	peakBF16    float64 // GFLOP/s of bf16 products, for the rows that multiply in bf16
	copyMiB     int
	clean       bool
	prepareOnly bool
	out         string
	serveArgs   multiFlag
	llamaArgs   multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if len(os.Args) == 2 && os.Args[1] == hogFlag {
		hog()
		return
	}
	var o options
	models := flag.String("models", strings.Join(shapeNames, ","), "comma-separated models to run: "+strings.Join(shapeNames, ", "))
	flag.BoolVar(&o.small, "small", false, "the same models at a few megabytes each (same architecture, dtype and layer pattern), to check the pipeline")
	flag.StringVar(&o.work, "work", filepath.Join("out", "bench-real"), "folder for the checkpoints, their GGUF exports, the binaries and the servers' logs")
	flag.StringVar(&o.binDir, "bin-dir", "", "folder holding built phase08_prefix and benchstartup binaries (default: build them into -work/bin)")
	flag.StringVar(&o.llamaDir, "llama-cpp", os.Getenv("LLAMA_CPP_DIR"), "a llama.cpp build whose llama-server runs beside serve (default $LLAMA_CPP_DIR; empty: serve alone)")
	flag.IntVar(&o.threads, "threads", runtime.NumCPU(), "threads of each server: serve's GOMAXPROCS, llama-server's -t and -tb")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds of (a)–(c), the servers alternating in each")
	flag.IntVar(&o.prompt, "prompt", 1000, "(a) tokens of the cold and cached prompt")
	flag.IntVar(&o.decode, "decode", 64, "(b) tokens generated after the cold prompt")
	flag.IntVar(&o.requests, "requests", 32, "(c) requests of the serving run")
	flag.IntVar(&o.concurrency, "concurrency", 8, "(c) requests in flight at once (llama-server's -np)")
	flag.IntVar(&o.systems, "system-prompts", 4, "(c) shared system prompts")
	flag.IntVar(&o.systemLen, "system-len", 256, "(c) tokens of each system prompt")
	flag.IntVar(&o.suffixMin, "suffix-min", 16, "(c) fewest tokens after the system prompt")
	flag.IntVar(&o.suffixMax, "suffix-max", 64, "(c) most tokens after the system prompt")
	flag.IntVar(&o.output, "output", 32, "(c) tokens each request generates")
	flag.IntVar(&o.startups, "startup-runs", 2, "(d) starts of each server under benchstartup, alternating")
	flag.IntVar(&o.ctx, "ctx", 16384, "tokens of KV cache of each server: serve's -blocks × 16, llama-server's -c")
	flag.IntVar(&o.hogs, "hogs", 0, "(c) also run the serving runs beside this many busy-looping processes, one core each (0: not)")
	flag.DurationVar(&o.runLimit, "run-limit", 15*time.Minute, "(c) longest a serving run may take: its requests unfinished then are cut and its row says how many finished (0: no limit)")
	flag.Float64Var(&o.peakGFLOPs, "peak-gflops", 0, "the machine's matrix-product GFLOP/s (from make bench-kernels), for the prefill bound; 0: not shown")
	flag.Float64Var(&o.peakBF16, "peak-gflops-bf16", 0, "the machine's bf16-product GFLOP/s (BenchmarkMatMulTBF16Dot), the prefill bound of the rows that multiply in bf16: llama-server on a bf16 checkpoint, and serve there unless -bf16-dot is off (its default is on where the CPU has AVX512-BF16); 0: those rows use -peak-gflops")
	flag.IntVar(&o.copyMiB, "copy-mib", 512, "size of each buffer of the copy-bandwidth measurement")
	flag.BoolVar(&o.clean, "clean", false, "delete each model's checkpoint and GGUF file once measured")
	flag.BoolVar(&o.prepareOnly, "prepare-only", false, "write the checkpoints and GGUF files, then stop (they take minutes and need no quiet machine)")
	flag.StringVar(&o.out, "out", "", "also write the tables to this markdown file (default: -work/bench-real.md)")
	flag.Var(&o.serveArgs, "serve-arg", "one more argument for serve (repeatable), in a tuned row of its own beside serve's default row")
	flag.Var(&o.llamaArgs, "llama-arg", "one more argument for llama-server (repeatable), in a tuned row of its own beside llama-server's default row")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "benchreal: serve beside llama-server on synthetic checkpoints of real models' sizes\n\nUsage: benchreal [flags]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.models = strings.Split(*models, ",")
	if o.out == "" {
		o.out = filepath.Join(o.work, "bench-real.md")
	}
	if err := run(context.Background(), o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchreal:", err)
		os.Exit(1)
	}
}

// check refuses flags that cannot run, before anything is written.
func (o options) check() error {
	var errs []error
	for _, m := range o.models {
		if _, err := shapeFor(m, o.small); err != nil {
			errs = append(errs, fmt.Errorf("-models: %w", err))
		}
	}
	for _, c := range []struct {
		name string
		v    int
		min  int
	}{{"-threads", o.threads, 1}, {"-rounds", o.rounds, 1}, {"-prompt", o.prompt, 1}, {"-decode", o.decode, 2},
		{"-requests", o.requests, 1}, {"-concurrency", o.concurrency, 1}, {"-system-prompts", o.systems, 1},
		{"-system-len", o.systemLen, 1}, {"-suffix-min", o.suffixMin, 1}, {"-output", o.output, 1},
		{"-startup-runs", o.startups, 0}, {"-copy-mib", o.copyMiB, 1}, {"-hogs", o.hogs, 0}} {
		if c.v < c.min {
			errs = append(errs, fmt.Errorf("%s must be ≥ %d, have %d", c.name, c.min, c.v))
		}
	}
	if o.runLimit < 0 {
		errs = append(errs, fmt.Errorf("-run-limit must be ≥ 0, have %s", o.runLimit))
	}
	if o.suffixMax < o.suffixMin {
		errs = append(errs, fmt.Errorf("-suffix-max (%d) must be ≥ -suffix-min (%d)", o.suffixMax, o.suffixMin))
	}
	if need := max(o.prompt+o.decode, o.concurrency*(o.systemLen+o.suffixMax+o.output)); o.ctx < need || o.ctx%16 != 0 {
		errs = append(errs, fmt.Errorf("-ctx must be a multiple of 16 and hold the longest run's tokens (%d), have %d", need, o.ctx))
	}
	return errors.Join(errs...)
}

// step is one measurement of the plan: round, what (single: (a) and (b);
// serving: one of (c)'s runs), and which server.
type step struct {
	round int
	what  string
	run   servingRun // of a serving step
	side  int
}

// plan orders the measurements: in each round, the single request on
// every server in turn, then each serving run on every server in turn,
// so the servers alternate A B A B ... and neither always runs first
// after the same kind of work.
func plan(rounds, sides int, runs []servingRun) []step {
	var out []step
	for r := range rounds {
		for s := range sides {
			out = append(out, step{round: r, what: "single", side: s})
		}
		for _, k := range runs {
			for s := range sides {
				out = append(out, step{round: r, what: "serving", run: k, side: s})
			}
		}
	}
	return out
}

// sample is what one server did on one model, every round.
type sample struct {
	ttftCold, ttftCached []time.Duration
	cachedHit            []int // (a): cache_n of the cached request
	decode               []float64
	serving              map[servingRun][]metrics.Summary
	starts               []startup
}

// result is one model's measurements.
type result struct {
	m      *prepared
	greedy string // whether the servers' greedy tokens agreed
	sides  []side
	s      map[string]*sample // by side name
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.work, "logs"), 0o755); err != nil {
		return err
	}
	st := settings{threads: o.threads, ctx: o.ctx, slots: o.concurrency, serveArgs: o.serveArgs, llamaArgs: o.llamaArgs}
	bins, err := binaries(o)
	if err != nil {
		return err
	}
	st.bin = bins.serve
	if o.llamaDir != "" {
		if st.llamaServer, err = findLlamaServer(o.llamaDir); err != nil {
			return err
		}
	}
	// The servers' threads: GOMAXPROCS reaches serve through the
	// environment its children inherit.
	os.Setenv("GOMAXPROCS", fmt.Sprint(o.threads))

	load0 := loadAverage()
	var bw0, rd0 float64
	var busy string
	if !o.prepareOnly {
		if busy = busyWarning(time.Second); busy != "" {
			fmt.Fprintln(stderr, busy)
		}
		fmt.Fprintf(stderr, "load average %s; measuring copy and read bandwidth (%d MiB, %d threads)\n", load0, o.copyMiB, o.threads)
		bw0 = copyBandwidth(o.copyMiB<<20, o.threads, 5)
		rd0 = readBandwidth(o.copyMiB<<20, o.threads, 5)
		runtime.GC()
		debug.FreeOSMemory()
	}

	sides := st.sides()
	var results []*result
	for _, name := range o.models {
		sh, _ := shapeFor(name, o.small)
		m, err := prepare(o, sh, bins.serve, st.llamaServer != "", stderr)
		if err != nil {
			return err
		}
		if o.prepareOnly {
			continue
		}
		res, err := measure(ctx, o, st, m, bins.benchstartup, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, res)
		if o.clean {
			os.RemoveAll(m.dir)
		}
	}
	if o.prepareOnly {
		return nil
	}
	bw1 := copyBandwidth(o.copyMiB<<20, o.threads, 5)
	rd1 := readBandwidth(o.copyMiB<<20, o.threads, 5)
	load1 := loadAverage()

	var b strings.Builder
	fmt.Fprintf(&b, "benchreal, %s; %s, %d threads; load average %s at the start, %s at the end\n\n",
		time.Now().Format("2006-01-02 15:04"), cpuName(), o.threads, load0, load1)
	if busy != "" {
		fmt.Fprintf(&b, "**%s.**\n\n", busy)
	}
	for _, sd := range sides {
		fmt.Fprintf(&b, "    %s\n", strings.Join(commandLine(sd, results), " "))
	}
	b.WriteString("\n" + st.describeDefaults())
	var kv []string
	for _, sd := range sides {
		kv = append(kv, sd.name+" "+kvDType(sd))
	}
	fmt.Fprintf(&b, "\nKV cache: %s. %s Copy bandwidth (read + written): %.1f GB/s before, %.1f GB/s after; read bandwidth %.1f GB/s before, %.1f GB/s after.\n\n",
		strings.Join(kv, ", "), productsNote(sides), bw0/1e9, bw1/1e9, rd0/1e9, rd1/1e9)
	b.WriteString(figuresTable(results, o))
	b.WriteString("\n")
	b.WriteString(servingTable(results, o))
	b.WriteString("\n")
	b.WriteString(boundsTable(results, o, max(bw0, bw1), max(rd0, rd1)))
	io.WriteString(stdout, b.String())
	return os.WriteFile(o.out, []byte(b.String()), 0o644)
}

// commandLine is sd's command for the first model run, with the port
// left out.
func commandLine(sd side, results []*result) []string {
	if len(results) == 0 {
		return nil
	}
	argv := sd.argv(results[0].m, -1)
	argv[0] = filepath.Base(argv[0])
	if sd.server == serverServe {
		argv = append([]string{"GOMAXPROCS=" + os.Getenv("GOMAXPROCS")}, argv...)
	}
	return argv
}

// bins are the binaries the run starts.
type bins struct{ serve, benchstartup string }

// binaries builds phase08_prefix and benchstartup into -work/bin, or
// finds them in -bin-dir.
func binaries(o options) (bins, error) {
	dir := o.binDir
	if dir == "" {
		dir = filepath.Join(o.work, "bin")
		goTool := os.Getenv("GO")
		if goTool == "" {
			goTool = "go"
		}
		cmd := exec.Command(goTool, "build", "-o", dir+string(filepath.Separator), "./phase08_prefix", "./cmd/benchstartup")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return bins{}, fmt.Errorf("building phase08_prefix and benchstartup (run from the repository's root, or give -bin-dir): %w", err)
		}
	}
	b := bins{serve: filepath.Join(dir, "phase08_prefix"), benchstartup: filepath.Join(dir, "benchstartup")}
	for _, p := range []string{b.serve, b.benchstartup} {
		if _, err := os.Stat(p); err != nil {
			return bins{}, err
		}
	}
	return b, nil
}

// findLlamaServer returns the llama-server of the llama.cpp build in dir.
func findLlamaServer(dir string) (string, error) {
	for _, sub := range []string{"build/bin", "bin", "."} {
		p := filepath.Join(dir, sub, "llama-server")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no llama-server under %s (looked in build/bin, bin and the folder itself)", dir)
}

// prepare writes m's checkpoint (unless the folder already holds one
// written with the same options) and, with llama.cpp, its GGUF export.
func prepare(o options, sh shape, bin string, gguf bool, log io.Writer) (*prepared, error) {
	m := &prepared{shape: sh, dir: filepath.Join(o.work, sh.name)}
	if o.small {
		m.dir += "-small"
	}
	stamp := filepath.Join(m.dir, "benchreal-options.json")
	want, err := json.Marshal(sh.opts)
	if err != nil {
		return nil, err
	}
	if have, err := os.ReadFile(stamp); err != nil || string(have) != string(want) {
		cfg, _ := sh.opts.Config()
		need := weightBytes(cfg, dtypeSize(sh.opts.DType)) * 2.2 // the checkpoint, its export, room
		if free := freeBytes(o.work); free > 0 && float64(free) < need {
			return nil, fmt.Errorf("%s: %s has %.1f GB free; the checkpoint and its GGUF file need about %.1f GB", sh.name, o.work, float64(free)/1e9, need/1e9)
		}
		fmt.Fprintf(log, "%s: writing the checkpoint to %s\n", sh.name, m.dir)
		os.RemoveAll(m.dir)
		t0 := time.Now()
		if err := model.WriteSynthetic(m.dir, sh.opts); err != nil {
			return nil, err
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := os.WriteFile(stamp, want, 0o644); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "%s: written in %.0f s\n", sh.name, time.Since(t0).Seconds())
	}
	if !gguf {
		return m, nil
	}
	m.gguf = filepath.Join(m.dir, "model.gguf")
	sfi, _ := os.Stat(stamp)
	if gfi, err := os.Stat(m.gguf); err == nil && sfi != nil && gfi.ModTime().After(sfi.ModTime()) {
		return m, nil
	}
	cmd := exec.Command(bin, "export-gguf", "-model", m.dir, "-out", m.gguf)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: export-gguf: %w", sh.name, err)
	}
	return m, nil
}

// measure runs the plan on m: the greedy check, the servers up side by
// side for (a)–(c), then (d) one at a time.
func measure(ctx context.Context, o options, st settings, m *prepared, benchstartup string, log io.Writer) (*result, error) {
	cfg, err := m.opts.Config()
	if err != nil {
		return nil, err
	}
	sides := st.sides()
	var ban [][2]any
	if st.llamaServer != "" {
		tok, err := tokenizer.Load(m.dir)
		if err != nil {
			return nil, err
		}
		ban = nonUTF8Tokens(tok)
	}
	res := &result{m: m, s: map[string]*sample{}}
	for _, sd := range sides {
		res.sides = append(res.sides, sd)
		res.s[sd.name] = &sample{serving: map[servingRun][]metrics.Summary{}}
	}
	client := newClient()
	defer client.CloseIdleConnections()
	if st.llamaServer != "" {
		if res.greedy, err = greedyCheck(ctx, o, st, m, ban, client, log); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "%s: greedy tokens with f32 KV on both servers: %s\n", m.name, res.greedy)
	}

	var srv []*running
	defer func() {
		for _, r := range srv {
			r.child.Stop(time.Minute)
		}
	}()
	targets := map[string]target{}
	for _, sd := range sides {
		r, err := start(ctx, sd, m, filepath.Join(o.work, "logs", m.name+"-"+logName(sd.name)+".log"))
		if err != nil {
			return nil, err
		}
		srv = append(srv, r)
		targets[sd.name] = target{url: r.url}
		if sd.server == serverLlama {
			targets[sd.name] = target{url: r.url, ban: ban}
		}
		// A first request, as every server gets one before it is timed.
		if _, err := complete(ctx, client, targets[sd.name], promptTokens(1, 16, 0, cfg.VocabSize), 4); err != nil {
			return nil, fmt.Errorf("%s: first request: %w", sd.name, err)
		}
	}

	for _, st := range plan(o.rounds, len(srv), servingRuns(o.hogs)) {
		r := srv[st.side]
		smp := res.s[r.name]
		switch st.what {
		case "single":
			p := promptTokens(uint64(1000+st.round), o.prompt, 0, cfg.VocabSize)
			cold, err := complete(ctx, client, targets[r.name], p, o.decode)
			if err != nil {
				return nil, fmt.Errorf("%s: cold prompt: %w", r.name, err)
			}
			hot, err := complete(ctx, client, targets[r.name], p, 1)
			if err != nil {
				return nil, fmt.Errorf("%s: cached prompt: %w", r.name, err)
			}
			smp.ttftCold = append(smp.ttftCold, cold.ttft())
			smp.decode = append(smp.decode, cold.decodeRate())
			smp.ttftCached = append(smp.ttftCached, hot.ttft())
			smp.cachedHit = append(smp.cachedHit, hot.cached)
			fmt.Fprintf(log, "%s round %d %s: TTFT cold %.3f s (%d cached), decode %.2f tok/s, TTFT cached %.3f s (%d cached); load %s\n",
				m.name, st.round, r.name, cold.ttft().Seconds(), cold.cached, cold.decodeRate(), hot.ttft().Seconds(), hot.cached, loadAverage())
		case "serving":
			s, err := servingStep(ctx, o, client, targets[r.name], st, cfg.VocabSize)
			if err != nil {
				return nil, fmt.Errorf("%s: serving run, %s: %w", r.name, st.run.label(), err)
			}
			smp.serving[st.run] = append(smp.serving[st.run], s)
			fmt.Fprintf(log, "%s round %d %s, %s: serving %.1f out tok/s, TTFT p50 %.3f s p99 %.3f s, ITL p50 %.1f ms, %d of %d prompt tokens cached, %.1f s; load %s\n",
				m.name, st.round, r.name, st.run.label(), s.OutputTokensPerSec, s.TTFT.P50.Seconds(), s.TTFT.P99.Seconds(), ms(s.ITL.P50), s.CachedTokens, s.PromptTokens, s.Wall.Seconds(), loadAverage())
		}
	}
	for _, r := range srv {
		if err := r.child.Stop(time.Minute); err != nil {
			fmt.Fprintf(log, "%s %s: %v\n", m.name, r.name, err)
		}
	}
	srv = nil

	for i := range o.startups {
		for _, sd := range sides {
			s, err := measureStartup(benchstartup, o.work, sd, m)
			if err != nil {
				return nil, err
			}
			res.s[sd.name].starts = append(res.s[sd.name].starts, s)
			fmt.Fprintf(log, "%s start %d %s: listening %.2f s, first answer %.2f s, RSS %.0f MiB\n", m.name, i, sd.name, s.listening.Seconds(), s.first.Seconds(), s.rss)
		}
	}
	return res, nil
}

// servingStep runs one serving run of the plan on t (servingRequests),
// beside the run's hogs.
func servingStep(ctx context.Context, o options, client *http.Client, t target, st step, vocab int) (metrics.Summary, error) {
	reqs, err := servingRequests(o, vocab, st.round, st.run)
	if err != nil {
		return metrics.Summary{}, err
	}
	if st.run.hogs > 0 {
		h, err := startHogs(st.run.hogs)
		if err != nil {
			return metrics.Summary{}, err
		}
		defer h.stop()
	}
	return limitedServing(ctx, o.runLimit, client, t, reqs, o.concurrency)
}

// greedyCheck starts both servers with f32 KV caches (so that only the
// order of their sums differs) and compares their greedy tokens on a
// 32-token prompt: the first of ten seeded prompts whose 32 tokens from
// serve are none of the tokens banned on llama-server (nonUTF8Tokens),
// so that the ban does not decide the comparison.
func greedyCheck(ctx context.Context, o options, st settings, m *prepared, ban [][2]any, client *http.Client, log io.Writer) (string, error) {
	cfg, _ := m.opts.Config()
	var outs [][]int32
	var prompt []int32
	// serve's KV cache is f32 by default; llama-server's is asked for.
	for i, sd := range []side{st.serveSide(nil), st.llamaSide([]string{"-ctk", "f32", "-ctv", "f32"})} {
		r, err := start(ctx, sd, m, filepath.Join(o.work, "logs", m.name+"-"+sd.server+"-check.log"))
		if err != nil {
			return "", err
		}
		t := target{url: r.url}
		if i == 1 {
			t.ban = ban
		}
		var out []int32
		for seed := uint64(7); seed < 17; seed++ {
			if i == 0 {
				prompt = promptTokens(seed, 32, 0, cfg.VocabSize)
			}
			s, err := complete(ctx, client, t, prompt, 32)
			if err != nil {
				r.child.Stop(time.Minute)
				return "", fmt.Errorf("%s: greedy check: %w", sd.name, err)
			}
			out = s.tokens
			if i == 1 || !slices.ContainsFunc(out, func(id int32) bool { return banned(ban, id) }) {
				break
			}
		}
		fmt.Fprintf(log, "%s %s, f32 KV: prompt %s -> %s\n", m.name, sd.server, idList(prompt), idList(out))
		outs = append(outs, out)
		if err := r.child.Stop(time.Minute); err != nil {
			fmt.Fprintf(log, "%s %s: %v\n", m.name, sd.name, err)
		}
	}
	i := firstDifference(outs[0], outs[1])
	switch {
	case i < 0:
		return "the same 32 of 32", nil
	case banned(ban, outs[0][i]):
		return fmt.Sprintf("the same up to token %d of 32, where serve's is a lone byte that llama-server is kept from choosing", i), nil
	}
	return fmt.Sprintf("the same up to token %d of 32", i), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadAverage is /proc/loadavg's three averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuName is /proc/cpuinfo's first model name.
func cpuName() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// freeBytes is the space left on dir's file system (0 if unknown).
func freeBytes(dir string) uint64 {
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		return 0
	}
	return s.Bavail * uint64(s.Bsize)
}

// medianDur and medianF are the medians of their samples (0 for none;
// the mean of the middle two for an even count).
func medianDur(xs []time.Duration) time.Duration {
	fs := make([]float64, len(xs))
	for i, x := range xs {
		fs[i] = float64(x)
	}
	return time.Duration(medianF(fs))
}

func medianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return benchrun.Median(xs)
}

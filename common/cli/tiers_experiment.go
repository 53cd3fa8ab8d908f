package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"kvlab/common/cachefile"
	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/kvevents"
	"kvlab/common/metrics"
	"kvlab/common/model/gguf"
	"kvlab/common/tokenizer"
	"kvlab/common/workload"
	"kvlab/kernels"
)

// The phase-9 experiment (docs/phase09_tiers.md): cache tiers under the
// pool. A multi-turn workload whose conversations outgrow the pool runs
// once in a pool that never evicts (the reference), then in a small pool
// with no tier, with a host-memory tier, with a small host-memory tier over
// a disk tier, and with a disk tier alone. Every configuration must
// generate the reference's tokens; the table shows what each tier saves
// (prefill computed, hit rate, TTFT) and what it costs (the time a
// promoted block takes, the promotions the cost rule skipped).

// TiersDesign is one prefix cache the experiment can put tiers under, with
// the word -design picks it by.
type TiersDesign struct {
	Flag string // "radix", "hashcow", "trie"
	Variant
}

// Tiers runs the experiment on the designs -design picks (the first by
// default) and prints one table. It fails unless every configuration
// generated the reference's tokens. It returns the exit code.
func Tiers(designs []TiersDesign, args []string, stdout, stderr io.Writer) int {
	return exitCode(tiersExperiment(designs, args, stdout, stderr), stderr, "phase09_tiers")
}

// setTiersDefaults sizes the multi_turn workload and the pool: 64
// conversations of four turns on one 128-token system prompt, each turn
// resending the whole history (about 340 tokens, 22 blocks, by the last
// turn), four starting a second, so that a few dozen are under way at
// once; the pool holds 160
// blocks, about eight conversations' histories, so a conversation's blocks
// are evicted before its next turn comes. A step computes at most 128
// prompt tokens: a history computed again takes several steps, so what a
// tier saves shows in TTFT as well as in the tokens.
func setTiersDefaults(sf *servingFlags, rf *runtimeFlags) {
	sf.params.Conversations, sf.params.Turns = 64, 4
	sf.params.PrefixLen = 128
	sf.params.SuffixMin, sf.params.SuffixMax = 16, 48
	sf.params.OutputMin, sf.params.OutputMax = 16, 32
	sf.params.RPS = 4
	sf.params.Think = 500 * time.Millisecond
	rf.eng.NumBlocks, rf.eng.MaxBatchTokens = 160, 128
}

// tierRow is one configuration's line of the table.
type tierRow struct {
	name     string
	run      *metrics.Run
	counters kvcache.TierCounters
	media    []string // the tiers' names, in Config.Tiers order
	llama    bool     // measured over HTTP on llama-server
}

// tierProbe is the engine tracer that keeps the pool's tier counters after
// every step: benchOne closes its engine when the run ends, and the
// counters are the pool's.
type tierProbe struct{ counters kvcache.TierCounters }

func (p *tierProbe) PoolEvent(kvcache.TraceEvent)           {}
func (p *tierProbe) Sequence(seq, request, sample int)      {}
func (p *tierProbe) Plan(step int, work []engine.TraceWork) {}
func (p *tierProbe) StepDone(pool *kvcache.Pool)            { p.counters = pool.TierCounters() }

// tierSetup builds a configuration's tiers when its run starts, so that no
// tier outlives its run in memory, and closes them after it.
type tierSetup struct {
	name   string
	design TiersDesign
	build  func() ([]kvcache.Tier, func() error, error) // nil: no tier
	pool   int                                          // blocks; 0: the small pool
}

func tiersExperiment(designs []TiersDesign, args []string, stdout, stderr io.Writer) error {
	fs, rf, sf := experimentFlags("tiers", "a multi-turn workload that outgrows the pool, with no cache tier, a RAM tier, RAM over disk, and disk alone", "multi_turn", stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "phase09_tiers: cache tiers under the pool: a multi-turn workload that outgrows it, with no tier, a RAM tier, RAM over disk, and disk alone\n\nUsage: phase09_tiers [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	sf.plotStem, sf.plotPath = "phase09", filepath.Join("out", "phase09-MODEL-tiers.svg")
	setTiersDefaults(sf, rf)
	var flags []string
	for _, d := range designs {
		flags = append(flags, d.Flag)
	}
	design := fs.String("design", designs[0].Flag, "the prefix cache the tiers go under: "+strings.Join(flags, ", ")+", or all")
	roomy := fs.Int("roomy-blocks", 4096, "the pool of the reference row, large enough that nothing is evicted")
	ramBlocks := fs.Int("ram-blocks", 2048, "the RAM tier's budget, in blocks (its bytes are each block's KV and tokens)")
	smallRAM := fs.Int("small-ram-blocks", 160, "the RAM tier's budget in blocks when a disk tier is under it")
	diskBlocks := fs.Int("disk-blocks", 2048, "the disk tier's budget, in blocks")
	diskDir := fs.String("disk-dir", "", "where the disk tiers write (a subdirectory per row, removed at the end); empty: a temporary directory")
	var lf llamaTierFlags
	lf.register(fs)
	if err := parseExperiment(fs, rf, sf, args); err != nil {
		return err
	}
	picked, err := pickDesigns(designs, *design)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"-roomy-blocks", *roomy}, {"-ram-blocks", *ramBlocks}, {"-small-ram-blocks", *smallRAM}, {"-disk-blocks", *diskBlocks}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, have %d", f.name, f.v)
		}
	}
	dir, err := rf.dir()
	if err != nil {
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
	fingerprint, err := cachefile.ModelFingerprint(dir)
	if err != nil {
		return err
	}
	id := cachefile.Identity{Model: fingerprint, BlockSize: base.BlockSize, Layers: m.Config.NumHiddenLayers,
		KVDim: m.Config.KVDim(), DType: base.KVCacheDType.Name()}
	blockBytes := int64(id.KVBytes() + 4*id.BlockSize) // kvcache.TierBlock.Size
	root := *diskDir
	if root == "" {
		if root, err = os.MkdirTemp("", "phase09-tiers-"); err != nil {
			return err
		}
		defer os.RemoveAll(root)
	}
	disk := func(sub string, blocks int) (*cachefile.DiskTier, error) {
		path := filepath.Join(root, sub)
		if err := os.RemoveAll(path); err != nil { // every row starts cold
			return nil, err
		}
		// The writer's queue holds everything the tier may hold: a Put
		// dropped because the writer fell behind would make the counts
		// depend on the machine.
		return cachefile.OpenDiskTier(cachefile.DiskTierConfig{Dir: path, Capacity: int64(blocks) * blockBytes, Identity: id,
			Seed: kvevents.DefaultHashSeed, QueueBlocks: blocks, QueueBytes: int64(blocks) * blockBytes * 2})
	}
	mib := func(blocks int) string {
		return strconv.FormatFloat(float64(int64(blocks)*blockBytes)/(1<<20), 'f', 1, 64)
	}

	var setups []tierSetup
	for di, d := range picked {
		prefix, sub := "", d.Flag
		if len(picked) > 1 {
			prefix = d.Flag + ", "
		}
		if di == 0 {
			setups = append(setups, tierSetup{name: prefix + "unbounded pool", design: d, pool: *roomy})
		}
		setups = append(setups,
			tierSetup{name: prefix + "no tier", design: d},
			tierSetup{name: prefix + "RAM", design: d, build: func() ([]kvcache.Tier, func() error, error) {
				return []kvcache.Tier{kvcache.NewRAMTier(int64(*ramBlocks)*blockBytes, nil)}, nil, nil
			}},
			tierSetup{name: prefix + "RAM over disk", design: d, build: func() ([]kvcache.Tier, func() error, error) {
				dt, err := disk(sub+"-ram-disk", *diskBlocks)
				if err != nil {
					return nil, nil, err
				}
				return []kvcache.Tier{kvcache.NewRAMTier(int64(*smallRAM)*blockBytes, dt), dt}, dt.Close, nil
			}},
			tierSetup{name: prefix + "disk", design: d, build: func() ([]kvcache.Tier, func() error, error) {
				dt, err := disk(sub+"-disk", *diskBlocks)
				if err != nil {
					return nil, nil, err
				}
				return []kvcache.Tier{dt}, dt.Close, nil
			}},
		)
	}
	total := len(setups)
	if lf.dir != "" {
		total += 2
	}
	var rows []tierRow
	var runs []*metrics.Run
	for i, s := range setups {
		cfg := base
		cfg.PrefixCache = s.design.PrefixCache
		if s.pool > 0 {
			cfg.NumBlocks = s.pool
		}
		probe := &tierProbe{}
		cfg.Trace = probe
		var closeTiers func() error
		if s.build != nil {
			if cfg.Tiers, closeTiers, err = s.build(); err != nil {
				return err
			}
		}
		got, err := sf.runCheckedNumbered(m, []namedConfig{{s.name, cfg}}, reqs, stderr, i, total)
		if closeTiers != nil {
			if cerr := closeTiers(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return err
		}
		row := tierRow{name: s.name, run: got[0], counters: probe.counters}
		for _, t := range cfg.Tiers {
			row.media = append(row.media, t.Name())
		}
		rows, runs = append(rows, row), append(runs, got[0])
	}
	if err := sameOutputs(runs); err != nil {
		return err
	}
	var llamaNote string
	if lf.dir != "" {
		ramMiB := int((int64(*ramBlocks)*blockBytes + 1<<20 - 1) >> 20)
		// llama-server's slots share one KV cache (-kvu) and fail a request
		// that finds it full instead of waiting: it gets the small pool's
		// tokens, or room for every slot's longest request if that is more.
		// Every output has its fixed length, so the reference run's longest
		// request is llama-server's too.
		ctx, what := base.NumBlocks*base.BlockSize, "the small pool's tokens"
		longest := 0
		for _, q := range runs[0].Requests {
			longest = max(longest, q.PromptLen+q.OutputLen)
		}
		if lf.slots*longest > ctx {
			ctx, what = lf.slots*longest, fmt.Sprintf("%d slots × the longest request", lf.slots)
		}
		for j, cram := range []int{0, ramMiB} {
			fmt.Fprintf(stderr, "[%d/%d] llama-server --cache-ram %d: %s, %d requests\n", len(setups)+j+1, total, cram, sf.name, len(reqs))
			run, err := lf.run(dir, base, ctx, cram, reqs, sf.progress(stderr), stderr)
			if err != nil {
				return fmt.Errorf("llama-server --cache-ram %d: %w", cram, err)
			}
			rows = append(rows, tierRow{name: fmt.Sprintf("llama-server RAM %d MiB", cram), run: run, llama: true})
		}
		llamaNote = fmt.Sprintf("llama-server rows: --cache-ram as named, the same weights (GGUF), -c %d (%s),\n"+
			"  -np %d -kvu -t %d, KV %s; p50/p99 are wall-clock TTFT at the client; its outputs are its own (other\n"+
			"  arithmetic, and tokens that are not UTF-8 alone banned), so its later turns' prompts differ from this engine's",
			ctx, what, lf.slots, lf.threads, llamaKV(base.KVCacheDType))
	}

	writeTiersTable(stdout, rows)
	var names []string
	for _, d := range picked {
		names = append(names, d.Name)
	}
	label := "design"
	if len(names) > 1 {
		label = "designs"
	}
	fmt.Fprintf(stdout, "%s: %s\n", label, strings.Join(names, ", "))
	fmt.Fprintf(stdout, "workload: %d conversations of %d turns on a %d-token system prompt, %d requests\n",
		sf.params.Conversations, sf.params.Turns, sf.params.PrefixLen, len(reqs))
	fmt.Fprintf(stdout, "pool %d blocks of %d tokens (unbounded: %d); RAM: %s MiB (%d blocks); disk: %s MiB (%d blocks)\n",
		base.NumBlocks, base.BlockSize, *roomy, mib(*ramBlocks), *ramBlocks, mib(*diskBlocks), *diskBlocks)
	fmt.Fprintf(stdout, "RAM over disk: RAM %s MiB (%d blocks) over the disk; every disk tier starts empty\n", mib(*smallRAM), *smallRAM)
	fmt.Fprintln(stdout, "counted: hit % (prompt tokens found in the pool or a tier), prefill (prompt tokens computed),")
	fmt.Fprintln(stdout, "  vs ref % (of the first row's prefill), RAM/disk blk (blocks promoted from each tier),")
	fmt.Fprintln(stdout, "  skip (promotions the cost rule skipped: it weighs measured times, so skips can differ between runs)")
	fmt.Fprintln(stdout, "measured on this machine, medians of the latest 15: RAM/disk µs (a promoted block: read, checks, copy into the pool),")
	fmt.Fprintln(stdout, "  comp µs (a block's prompt rows in the forward); the cost rule skips a tier while its µs passes comp µs")
	fmt.Fprintln(stdout, sf.clockNote()+"; p50/p99: TTFT")
	if newClockIsStep(sf.clock) {
		fmt.Fprintln(stdout, "  a promotion takes no virtual time: the tier rows' TTFT differs only by the prompt tokens they compute")
	}
	if llamaNote != "" {
		fmt.Fprintln(stdout, llamaNote)
	} else {
		fmt.Fprintln(stdout, "llama-server rows left out: give -llama-cpp DIR, a llama.cpp build with bin/llama-server")
		fmt.Fprintln(stdout, "  (make phase09 LLAMA_CPP_DIR=DIR)")
	}
	fmt.Fprintf(stdout, "outputs: every configuration of this engine generated exactly the %s's tokens for all %d requests\n", rows[0].name, len(reqs))

	var labels []string
	var values []float64
	names = names[:0]
	for _, r := range rows {
		if r.llama {
			continue
		}
		p := r.run.Summary().PrefillTokensComputed
		names, values, labels = append(names, r.name), append(values, float64(p)), append(labels, strconv.Itoa(p))
	}
	title := fmt.Sprintf("Prompt tokens computed, %d conversations of %d turns, %d-block pool", sf.params.Conversations, sf.params.Turns, base.NumBlocks)
	return sf.writePlot(stdout, func(w io.Writer) error {
		return metrics.WriteBars(w, title, "prompt tokens computed", names, values, labels)
	})
}

// newClockIsStep reports whether -clock is a virtual clock.
func newClockIsStep(clock string) bool { return strings.HasPrefix(clock, "step:") }

// pickDesigns returns the designs -design names: one flag word, a
// comma-separated list, or all.
func pickDesigns(designs []TiersDesign, which string) ([]TiersDesign, error) {
	if which == "all" {
		return designs, nil
	}
	var out []TiersDesign
	for _, w := range strings.Split(which, ",") {
		w = strings.TrimSpace(w)
		found := false
		for _, d := range designs {
			if d.Flag == w {
				out, found = append(out, d), true
			}
		}
		if !found {
			var flags []string
			for _, d := range designs {
				flags = append(flags, d.Flag)
			}
			return nil, fmt.Errorf("-design: unknown design %q (want %s, or all)", w, strings.Join(flags, ", "))
		}
	}
	return out, nil
}

// tierNumbers are the per-medium columns of a row: blocks promoted, the
// median of a promoted block's latest times, and the promotions skipped.
type tierNumbers struct {
	hit             float64
	prefill         int
	p50, p99        time.Duration
	ram, disk       int
	ramNs, diskNs   float64
	skipped         int
	hasRAM, hasDisk bool
	computeNs       float64 // a block's prompt rows in the forward, as the cost rule weighs them
}

func rowNumbers(r tierRow) tierNumbers {
	s := r.run.Summary()
	n := tierNumbers{hit: s.HitRate, p50: s.TTFT.P50, p99: s.TTFT.P99, prefill: s.PrefillTokensComputed,
		computeNs: r.counters.PrefillNanosPerRow * float64(r.run.Engine.BlockSize)}
	if r.llama {
		n.prefill = s.PromptTokens - s.CachedTokens
	}
	for i, medium := range r.media {
		promoted, ns, skipped := at(r.counters.Promoted, i), atF(r.counters.PromoteNanos, i), at(r.counters.Skipped, i)
		n.skipped += skipped
		switch medium {
		case "CPU":
			n.hasRAM, n.ram, n.ramNs = true, n.ram+promoted, ns
		case "DISK":
			n.hasDisk, n.disk, n.diskNs = true, n.disk+promoted, ns
		}
	}
	return n
}

func at(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

func atF(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// writeTiersTable prints the rows; the first is the reference the
// prefill percentages are of.
func writeTiersTable(w io.Writer, rows []tierRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "configuration\thit %\tprefill\tvs ref %\tp50 ms\tp99 ms\tRAM blk\tdisk blk\tRAM µs\tdisk µs\tcomp µs\tskip\t")
	ref := rowNumbers(rows[0]).prefill
	dash := "-"
	for _, r := range rows {
		n := rowNumbers(r)
		ram, disk, ramUs, diskUs, compute, skip := dash, dash, dash, dash, dash, dash
		if n.hasRAM {
			ram, ramUs = strconv.Itoa(n.ram), usOf(n.ramNs)
		}
		if n.hasDisk {
			disk, diskUs = strconv.Itoa(n.disk), usOf(n.diskNs)
		}
		if n.hasRAM || n.hasDisk {
			compute, skip = usOf(n.computeNs), strconv.Itoa(n.skipped)
		}
		vs := dash
		if ref > 0 {
			vs = pct(float64(n.prefill) / float64(ref))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name, pct(n.hit), n.prefill, vs,
			msOf(n.p50), msOf(n.p99), ram, disk, ramUs, diskUs, compute, skip)
	}
	tw.Flush()
}

// usOf is a promotion's time in microseconds, "-" before the first.
func usOf(ns float64) string {
	if ns == 0 {
		return "-"
	}
	return strconv.FormatFloat(ns/1e3, 'f', 1, 64)
}

// llamaTierFlags are the llama-server rows' settings.
type llamaTierFlags struct {
	dir     string
	threads int
	slots   int
	timeout time.Duration
}

func (l *llamaTierFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.dir, "llama-cpp", "", "a llama.cpp build (its llama-server in build/bin, bin or the folder itself): adds llama-server on the same workload and weights, with its host-memory prompt cache off (--cache-ram 0) and the RAM tier's size (make phase09 passes $LLAMA_CPP_DIR)")
	fs.IntVar(&l.threads, "llama-threads", 2, "with -llama-cpp, llama-server's threads (-t, -tb)")
	fs.IntVar(&l.slots, "llama-slots", 4, "with -llama-cpp, llama-server's slots (-np), sharing one KV cache of the small pool's tokens (-kvu)")
	fs.DurationVar(&l.timeout, "llama-timeout", 2*time.Minute, "with -llama-cpp, the most one request may take")
}

// llamaServerIn returns the llama-server binary of the llama.cpp build in
// dir.
func llamaServerIn(dir string) (string, error) {
	for _, sub := range []string{"build/bin", "bin", "."} {
		p := filepath.Join(dir, sub, "llama-server")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("-llama-cpp: no llama-server under %s (looked in build/bin, bin and the folder itself)", dir)
}

// llamaKV is llama-server's name of a KV dtype (-ctk, -ctv).
func llamaKV(dt kernels.KVDType) string {
	switch dt {
	case kernels.KVBF16:
		return "bf16"
	case kernels.KVF16:
		return "f16"
	}
	return "f32"
}

// run serves reqs on a fresh llama-server over the model in dir, exported
// to GGUF, with a KV cache of nctx tokens and a host-memory prompt cache of
// cram MiB, and returns what the client saw.
func (l *llamaTierFlags) run(dir string, base engine.Config, nctx, cram int, reqs []workload.Request, progress, log io.Writer) (*metrics.Run, error) {
	bin, err := llamaServerIn(l.dir)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "phase09-llama-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	path := filepath.Join(work, "model.gguf")
	if _, err := gguf.ExportFile(dir, path); err != nil {
		return nil, fmt.Errorf("exporting %s to GGUF: %w", dir, err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	var ban [][2]any
	for _, id := range tok.PartialCharacters() {
		ban = append(ban, [2]any{id, false})
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	kv := llamaKV(base.KVCacheDType)
	args := []string{"-m", path, "-c", strconv.Itoa(nctx), "-np", strconv.Itoa(l.slots), "-kvu",
		"-t", strconv.Itoa(l.threads), "-tb", strconv.Itoa(l.threads), "-ctk", kv, "-ctv", kv,
		"--cache-ram", strconv.Itoa(cram), "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--no-webui"}
	fmt.Fprintf(log, "  %s %s\n", bin, strings.Join(args, " "))
	child, err := StartChild(bin, args, filepath.Join(work, "llama-server.log"))
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := child.WaitHealthy(ctx, url, 2*time.Minute); err != nil {
		child.Kill()
		return nil, err
	}
	e := newLlamaCompletion(ctx, url, l.timeout, ban)
	run, err := workload.Run(e, reqs, workload.RunOptions{Name: fmt.Sprintf("llama-server --cache-ram %d", cram), Progress: progress})
	e.Close()
	if stop := child.Stop(30 * time.Second); err == nil && stop != nil {
		err = stop
	}
	if err != nil {
		return nil, err
	}
	for _, q := range run.Requests {
		if q.Failed() {
			return nil, fmt.Errorf("request %d failed: %s; the server's output:\n%s", q.ID, q.Err, child.LogTail())
		}
	}
	return run, nil
}

// llamaCompletion is workload.Engine over llama-server's streamed POST
// /completion: the prompt's token ids, greedy (top_k 1), ignore_eos, the
// generated ids in every event (return_tokens), and in the last event
// timings.cache_n, the prompt tokens llama-server reused: from the slot's
// KV, or restored from its host-memory prompt cache. Each token is stamped
// where its event was read, so TTFT is the client's. llama-server parses
// every answer's text as a chat message and fails one that is not UTF-8, so
// the tokens that are not UTF-8 alone are banned (logit_bias).
type llamaCompletion struct {
	*workload.Remote
	url     string
	client  *http.Client
	timeout time.Duration
	ban     [][2]any
}

func newLlamaCompletion(ctx context.Context, url string, timeout time.Duration, ban [][2]any) *llamaCompletion {
	// A new connection per request: llama-server closes a kept connection
	// it deems idle, and a POST sent on it as it closes fails.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}}
	return &llamaCompletion{Remote: workload.NewRemote(ctx), url: url, client: client, timeout: timeout, ban: ban}
}

// llamaEvent is one streamed /completion event.
type llamaEvent struct {
	Tokens  []int32 `json:"tokens"`
	Stop    bool    `json:"stop"`
	Timings *struct {
		CacheN int `json:"cache_n"`
	} `json:"timings"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (e *llamaCompletion) Submit(id int, prompt []int32, maxTokens int) error {
	body, err := json.Marshal(map[string]any{
		"prompt": prompt, "n_predict": maxTokens, "temperature": 0, "top_k": 1, "ignore_eos": true,
		"cache_prompt": true, "stream": true, "return_tokens": true, "logit_bias": e.ban,
	})
	if err != nil {
		return err
	}
	e.Start(func(ctx context.Context) { e.stream(ctx, id, maxTokens, body) })
	return nil
}

func (e *llamaCompletion) Close() {
	e.Remote.Close()
	e.client.CloseIdleConnections()
}

// stream runs one request and queues its events: its tokens, the last
// marked Done, or an error event after the tokens that came.
func (e *llamaCompletion) stream(ctx context.Context, id, want int, body []byte) {
	if e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	var toks []workload.Token
	cached, err := e.read(ctx, body, func(t int32, at time.Time) {
		toks = append(toks, workload.Token{ID: id, Token: t, At: at})
	})
	if err == nil && len(toks) != want {
		err = fmt.Errorf("asked for %d tokens, the stream carried %d", want, len(toks))
	}
	if err != nil {
		e.Push(append(toks, workload.Token{ID: id, Err: err, At: time.Now()})...)
		return
	}
	e.SetCached(id, cached)
	toks[len(toks)-1].Done = true
	e.Push(toks...)
}

// read posts body and reads the stream up to its event with stop, calling
// tok for each token; it returns timings.cache_n.
func (e *llamaCompletion) read(ctx context.Context, body []byte, tok func(int32, time.Time)) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		at := time.Now()
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			var ev llamaEvent
			if jerr := json.Unmarshal(bytes.TrimSpace(data), &ev); jerr != nil {
				return 0, fmt.Errorf("bad event %.200q: %w", data, jerr)
			}
			if ev.Error != nil {
				return 0, fmt.Errorf("server error: %s", ev.Error.Message)
			}
			for _, t := range ev.Tokens {
				tok(t, at)
			}
			if ev.Stop {
				if ev.Timings == nil {
					return 0, errors.New("the last event has no timings")
				}
				return ev.Timings.CacheN, nil
			}
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("stream ended before its last event: %w", err)
		}
	}
}

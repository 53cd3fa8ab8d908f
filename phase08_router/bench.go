package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"kvlab/common/cli"
	"kvlab/common/metrics"
	"kvlab/common/tokenizer"
	"kvlab/common/workload"
	"kvlab/phase08_router/router"
)

// benchParams are the routing workload's defaults for make phase08-router:
// sized so that four policies, each over three fresh replicas, run in a
// couple of minutes on two cores, and so that one replica's pool (-blocks)
// holds two or three of the six system prompts with their conversations,
// never all six.
func benchParams() workload.Params {
	p := workload.DefaultParams("routing")
	p.Conversations, p.Turns = 24, 3
	p.PrefixLen = 512
	p.SuffixMin, p.SuffixMax = 16, 48
	p.OutputMin, p.OutputMax = 16, 32
	p.RPS = 4
	p.Think = 200 * time.Millisecond
	p.Vocab = 0 // the model's
	return p
}

// Row is one policy's line of the comparison.
type Row struct {
	Policy   string        `json:"policy"`
	Requests int           `json:"requests"`
	Failed   int           `json:"failed"`
	TTFTP50  time.Duration `json:"ttft_p50_ns"`
	TTFTP99  time.Duration `json:"ttft_p99_ns"`
	OutTokS  float64       `json:"output_tokens_per_sec"`
	// PromptTokens and CachedTokens are the replicas' own usage reports,
	// summed by the router; ReplicaHits is the replicas' prefix-cache hit
	// counters (their /metrics) over the run, which must agree; -1 for
	// replicas without such a counter (llama-server).
	PromptTokens int   `json:"prompt_tokens"`
	CachedTokens int   `json:"cached_tokens"`
	ReplicaHits  int   `json:"replica_hits"`
	PerReplica   []int `json:"requests_per_replica"`
	// Imbalance is max/mean requests per replica: 1 is perfectly even.
	Imbalance float64 `json:"imbalance"`
	// Warms are the slot copies the router made (save, then restore).
	Warms int `json:"slot_warms"`
}

// bench runs the routing workload once per policy, each over fresh
// replicas, and prints one table.
func bench(ctx context.Context, args []string, stdout, log io.Writer) error {
	fs := flag.NewFlagSet("phase08_router bench", flag.ContinueOnError)
	fs.SetOutput(log)
	policies := fs.String("policies", strings.Join(router.Policies, ","), "comma-separated policies to compare, each over fresh replicas")
	systems := fs.Int("system-prompts", workload.DefaultSystemPrompts, "distinct system prompts the conversations draw from")
	jsonPath := fs.String("json", "", "write the rows and every request's record as JSON to this file")
	quiet := fs.Bool("quiet", false, "no progress bar")
	wide := fs.Bool("wide", false, "print every column of the table (about 170 characters wide), not only those the comparison is read by; the JSON has them all")
	timeout := fs.Duration("request-timeout", 5*time.Minute, "a request not finished after this long fails")
	var lf llamaFlags
	lf.register(fs)
	var ff fleetFlags
	ff.register(fs, 3, 96)
	var pf policyFlags
	pf.register(fs)
	p := benchParams()
	p.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if len(ff.urls) > 0 {
		return fmt.Errorf("bench starts fresh replicas for every policy, so that no policy inherits another's cache: use -replicas, not -replica")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	llama := lf.dir != ""
	if llama && !set["policies"] {
		*policies = strings.Join(llamaPolicies, ",")
	}
	if llama && !set["system-prompts"] {
		*systems = llamaSystemPrompts
	}
	if llama && !set["conversations"] {
		p.Conversations = llamaConversations
	}
	if llama && !set["rps"] {
		p.RPS = llamaRPS
	}
	specs := strings.Split(*policies, ",")
	var names []string
	for _, spec := range specs {
		ps, err := parseSpec(spec)
		if err != nil {
			return fmt.Errorf("-policies: %w", err)
		}
		if ps.slots && !llama {
			return fmt.Errorf("-policies: %s routes to llama-server's slots: give -llama-cpp", spec)
		}
		if llama && ps.name == "kv-events" {
			return fmt.Errorf("-policies: llama-server publishes no KV events; kv-events needs this project's replicas")
		}
		names = append(names, ps.name)
	}
	if err := errors.Join(ff.validate(), pf.validate("-policies", names...), lf.validate(llama)); err != nil {
		return err
	}
	switch {
	case *systems < 1:
		return fmt.Errorf("-system-prompts must be ≥ 1, have %d", *systems)
	case *timeout <= 0:
		return fmt.Errorf("-request-timeout must be > 0, have %v", *timeout)
	}
	if p.Vocab == 0 {
		cfg, err := cli.DefaultModel().Config()
		if pf.modelDir != "" {
			err = fmt.Errorf("give -vocab with -model")
		}
		if err != nil {
			return err
		}
		p.Vocab = cfg.VocabSize
	}
	reqs, err := workload.Routing(p, *systems)
	if err != nil {
		return err
	}
	tok, err := pf.tokenizer()
	if err != nil {
		return err
	}
	if pf.modelDir != "" {
		ff.extra = append(ff.extra, "-model="+pf.modelDir)
	}
	be := serveBackend(&ff, *timeout)
	granule := ff.blockSize
	if llama {
		if be, err = lf.backend(ctx, &ff, &pf, tok, *timeout, log); err != nil {
			return err
		}
		granule = 1 // a slot reuses any common prefix, not whole blocks
	}
	var rows []Row
	var runs []*metrics.Run
	for i, spec := range specs {
		what := fmt.Sprintf("%d replicas of %d blocks", ff.n, ff.blocks)
		if llama {
			what = fmt.Sprintf("%d llama-server replicas of %d slots", ff.n, lf.slots)
		}
		fmt.Fprintf(log, "[%d/%d] %s: routing workload, %d conversations × %d turns over %d system prompts, %s\n",
			i+1, len(specs), spec, p.Conversations, p.Turns, *systems, what)
		var progress io.Writer = log
		if *quiet || !cli.IsTerminal(log) { // a redrawn bar is noise in a file or a pipe
			progress = nil
		}
		row, run, err := benchPolicy(ctx, spec, be, &pf, tok, reqs, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", spec, err)
		}
		rows = append(rows, row)
		runs = append(runs, run)
	}
	promptTotal, best := bestCached(reqs, granule)
	writeRows(stdout, rows, best, *wide)
	why := " (each conversation's earlier turns, and its system prompt once another conversation used it)"
	if !*wide {
		why = "\n     " + why
	}
	fmt.Fprintf(stdout, "best: %d of the %d prompt tokens can be found cached%s\n", best, promptTotal, why)
	if *jsonPath != "" {
		if err := os.MkdirAll(filepath.Dir(*jsonPath), 0o755); err != nil {
			return err
		}
		b, err := json.MarshalIndent(struct {
			Rows []Row          `json:"rows"`
			Runs []*metrics.Run `json:"runs"`
		}{rows, runs}, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if llama {
		return checkLlamaRows(stdout, rows, runs)
	}
	return checkRows(stdout, rows, runs)
}

// checkRows fails on any failed request, on a router sum that disagrees
// with the replicas' own counters, and on outputs that differ between
// policies: routing may change where a request runs, never what it says.
func checkRows(stdout io.Writer, rows []Row, runs []*metrics.Run) error {
	for _, r := range rows {
		if r.Failed > 0 {
			return fmt.Errorf("%s: %d of %d requests failed (see -json)", r.Policy, r.Failed, r.Requests)
		}
		if r.CachedTokens != r.ReplicaHits {
			return fmt.Errorf("%s: the router summed %d cached tokens from the replicas' answers, their counters say %d", r.Policy, r.CachedTokens, r.ReplicaHits)
		}
	}
	fmt.Fprintln(stdout, "cached: the replicas' cached_tokens summed at the router; equal to their own prefix_cache_hits_total for every policy")
	if len(runs) > 1 {
		for _, run := range runs[1:] {
			for j, r := range run.Requests {
				if want := runs[0].Requests[j].Output; !slices.Equal(r.Output, want) {
					return fmt.Errorf("%s: request %d generated %v; %s generated %v", run.Name, r.ID, r.Output, runs[0].Name, want)
				}
			}
		}
		fmt.Fprintf(stdout, "outputs: every policy generated exactly the same tokens for all %d requests (greedy, ignore_eos)\n", len(runs[0].Requests))
	}
	return nil
}

// bestCached returns the prompt tokens of the routing workload's requests
// and the most of them any fleet could find cached: a first turn at best
// reuses the longest whole-block prefix it shares with an earlier first
// turn (its system prompt, if another conversation used it first), and a
// follow-up the whole previous turn — its prompt and every generated token
// but the last, whose KV is never computed — in whole blocks. It reads
// only lengths: with ignore_eos every answer is MaxTokens long, so both
// numbers are known before the run.
func bestCached(reqs []workload.Request, blockSize int) (prompt, cached int) {
	plen := map[int]int{}
	var firsts [][]int32
	for _, r := range reqs {
		if f := r.FollowUp; f != nil {
			prev := reqs[f.Prev] // IDs are slice positions in a generated workload
			held := plen[prev.ID] + prev.MaxTokens - 1
			plen[r.ID] = held + 1 + len(f.UserTokens)
			cached += held / blockSize * blockSize
		} else {
			plen[r.ID] = len(r.Prompt)
			shared := 0
			for _, p := range firsts {
				shared = max(shared, commonPrefix(p, r.Prompt))
			}
			cached += shared / blockSize * blockSize
			firsts = append(firsts, r.Prompt)
		}
		prompt += plen[r.ID]
	}
	return prompt, cached
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// writeRows prints the table: by default the columns the comparison is
// read by, under 120 characters; wide adds the request counts, throughput,
// prompt tokens and each replica's share.
func writeRows(w io.Writer, rows []Row, best int, wide bool) {
	var rr int
	for _, r := range rows {
		if r.Policy == "round-robin" {
			rr = r.CachedTokens
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if wide {
		fmt.Fprintln(tw, "policy\treqs\tfailed\tTTFT p50 (ms)\tTTFT p99 (ms)\tout (tok/s)\tprompt (tok)\tcached (tok)\thit (%)\tof best (%)\tvs round-robin\trequests per replica\timbalance\tslot warms\t")
	} else {
		fmt.Fprintln(tw, "policy\tfailed\tTTFT p50 (ms)\tTTFT p99 (ms)\tcached (tok)\thit (%)\tof best (%)\tvs round-robin\timbalance\t")
	}
	for _, r := range rows {
		vs := "n/a"
		if rr > 0 {
			vs = fmt.Sprintf("%.2f×", float64(r.CachedTokens)/float64(rr))
		}
		per := make([]string, len(r.PerReplica))
		for i, n := range r.PerReplica {
			per[i] = strconv.Itoa(n)
		}
		hit := 0.0
		if r.PromptTokens > 0 {
			hit = 100 * float64(r.CachedTokens) / float64(r.PromptTokens)
		}
		ofBest := 0.0
		if best > 0 {
			ofBest = 100 * float64(r.CachedTokens) / float64(best)
		}
		if wide {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%.1f\t%.1f\t%s\t%s\t%.2f\t%d\t\n", r.Policy, r.Requests, r.Failed,
				ms(r.TTFTP50), ms(r.TTFTP99), r.OutTokS, r.PromptTokens, r.CachedTokens, hit, ofBest, vs, strings.Join(per, " / "), r.Imbalance, r.Warms)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%d\t%.1f\t%.1f\t%s\t%.2f\t\n", r.Policy, r.Failed,
				ms(r.TTFTP50), ms(r.TTFTP99), r.CachedTokens, hit, ofBest, vs, r.Imbalance)
		}
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// backend is what a bench run stands on: how to start fresh replicas,
// the client that replays the workload through the router, and how to read
// the replicas' own hit counters (nil: they keep none the bench can read).
type backend struct {
	start     func(ctx context.Context, events bool) (urls []string, stop func() error, err error)
	engine    func(ctx context.Context, url string) (workload.Engine, func())
	hits      func(ctx context.Context, urls []string) (int, error)
	slots     int // each replica's slots, for the policies that route to them
	blockSize int // the replicas' KV block size, for kv-events
}

// serveBackend is the runnables' serve, started by ff, replayed with the
// OpenAI client every bench uses.
func serveBackend(ff *fleetFlags, timeout time.Duration) backend {
	return backend{
		start: func(ctx context.Context, events bool) ([]string, func() error, error) {
			urls, fleet, err := ff.start(ctx, events, os.Stderr)
			if err != nil {
				return nil, nil, err
			}
			return urls, func() error { return fleet.Stop(45 * time.Second) }, nil
		},
		engine: func(ctx context.Context, url string) (workload.Engine, func()) {
			e := cli.NewHTTPEngine(ctx, url, "", timeout)
			return e, e.Close
		},
		hits:      scrapeHits,
		blockSize: ff.blockSize,
	}
}

// benchPolicy starts fresh replicas and a router with the policy spec,
// replays reqs through the router, and stops them.
func benchPolicy(ctx context.Context, spec string, be backend, pf *policyFlags, tok *tokenizer.Tokenizer, reqs []workload.Request, progress io.Writer) (row Row, run *metrics.Run, err error) {
	ps, err := parseSpec(spec)
	if err != nil {
		return row, nil, err
	}
	urls, stopFleet, err := be.start(ctx, ps.name == "kv-events")
	if err != nil {
		return row, nil, err
	}
	defer func() {
		if serr := stopFleet(); serr != nil && err == nil {
			err = serr
		}
	}()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := 0
	if ps.slots {
		slots = be.slots
	}
	rt, kv, err := pf.newRouter(rctx, ps, urls, be.blockSize, tok, slots)
	if err != nil {
		return row, nil, err
	}
	if kv != nil {
		// Route nothing before every replica's snapshot is in, or the
		// first requests would be routed on an empty index.
		deadline := time.Now().Add(10 * time.Second)
		for i := range urls {
			for !kv.Live(i) {
				if time.Now().After(deadline) {
					return row, nil, fmt.Errorf("replica %d sent no KV event batch on %s within 10s: does it publish KV events?", i, urls[i])
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	url, stop, err := listen(rt)
	if err != nil {
		return row, nil, err
	}
	defer stop()
	before := 0
	if be.hits != nil {
		if before, err = be.hits(ctx, urls); err != nil {
			return row, nil, err
		}
	}
	e, closeEngine := be.engine(ctx, url)
	run, err = workload.Run(e, reqs, workload.RunOptions{Name: spec, Progress: progress})
	closeEngine()
	if err != nil {
		return row, nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); rt.InFlight() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	sum := run.Summary()
	row = Row{Policy: spec, Requests: sum.Requests, Failed: sum.Failed, TTFTP50: sum.TTFT.P50, TTFTP99: sum.TTFT.P99,
		OutTokS: sum.OutputTokensPerSec, ReplicaHits: -1}
	if be.hits != nil {
		after, err := be.hits(ctx, urls)
		if err != nil {
			return row, nil, err
		}
		row.ReplicaHits = after - before
	}
	most, total := 0, 0
	for _, st := range rt.Stats() {
		row.PromptTokens += st.PromptTokens
		row.CachedTokens += st.CachedTokens
		row.PerReplica = append(row.PerReplica, st.Requests)
		most, total = max(most, st.Requests), total+st.Requests
	}
	if total > 0 {
		row.Imbalance = float64(most) / (float64(total) / float64(len(urls)))
	}
	row.Warms = rt.Warms()
	return row, run, nil
}

// scrapeHits sums the replicas' kvlab:prefix_cache_hits_total.
func scrapeHits(ctx context.Context, urls []string) (int, error) {
	total := 0
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		n, err := promValue(resp.Body, "kvlab:prefix_cache_hits_total")
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s/metrics: %w", u, err)
		}
		total += int(n)
	}
	return total, nil
}

// promValue reads one unlabelled sample from Prometheus text.
func promValue(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s sample", name)
}

// listen serves h on a free loopback port until stop is called.
func listen(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

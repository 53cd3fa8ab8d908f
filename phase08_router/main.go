// Command phase08_router is a router in front of several serving
// replicas: the same HTTP API as one replica's serve, with each request
// sent to the replica most likely to hold its prompt's prefix.
//
//	phase08_router serve --replicas 3 --design prefix --policy prefix   start three replicas and route over them
//	phase08_router serve --replica http://127.0.0.1:8001 --replica http://127.0.0.1:8002 --policy kv-events
//	phase08_router bench                                                 every policy on the routing workload, one table
//
// The library is phase08_router/router; docs/phase08_router.md explains
// the policies and the measurements.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvlab/common/cli"
	"kvlab/common/httpx"
	"kvlab/common/kvevents"
	"kvlab/common/tokenizer"
	"kvlab/phase08_router/router"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command line; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprint(stderr, `phase08_router: route requests over several serving replicas by what their KV caches hold

Usage: phase08_router <command> [flags]

Commands:
  serve   the router: OpenAI and llama-server APIs in front of the replicas
  bench   every policy on the routing workload over fresh replicas, one table

Run 'phase08_router <command> -h' for a command's flags.
`)
	}
	if len(args) == 0 {
		usage()
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = serve(ctx, args[1:], nil, stderr)
	case "bench":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = bench(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage()
		return 0
	default:
		fmt.Fprintf(stderr, "phase08_router: unknown command %q\n\n", args[0])
		usage()
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintf(stderr, "phase08_router %s: %v\n", args[0], err)
	return 1
}

var errUsage = errors.New("usage")

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// fleetFlags describe the replicas: given as URLs, or started here.
type fleetFlags struct {
	urls      multiFlag
	n         int
	design    string
	binDir    string
	blocks    int
	blockSize int
	extra     multiFlag
	logDir    string
	startWait time.Duration
}

func (f *fleetFlags) register(fs *flag.FlagSet, n int, blocks int) {
	fs.Var(&f.urls, "replica", "a replica's URL (repeatable); instead of starting replicas")
	fs.IntVar(&f.n, "replicas", n, "replicas to start as child processes when no -replica is given")
	fs.StringVar(&f.design, "design", "prefix", "what the started replicas run: baseline, prefix, hashcow or compressed")
	fs.StringVar(&f.binDir, "bin-dir", "", "folder of the replicas' binaries (default: beside this program, then bin/, then PATH)")
	fs.IntVar(&f.blocks, "blocks", blocks, "KV blocks of each started replica (0: its default)")
	fs.IntVar(&f.blockSize, "block-size", 16, "tokens per KV block of each started replica; the kv-events policy hashes with it until the events say otherwise")
	fs.Var(&f.extra, "replica-arg", "one more flag for each started replica's serve, e.g. -replica-arg=-max-running=8 (repeatable)")
	fs.StringVar(&f.logDir, "logs", filepath.Join("out", "phase08-router-logs"), "folder for the started replicas' output")
	fs.DurationVar(&f.startWait, "start-timeout", 2*time.Minute, "how long a started replica may take to answer /health")
}

// validate refuses fleet flags that could not work, before anything starts.
func (f *fleetFlags) validate() error {
	if len(f.urls) > 0 {
		return nil
	}
	if _, ok := router.Designs[f.design]; !ok {
		return fmt.Errorf("-design: unknown design %q (want baseline, prefix, hashcow or compressed)", f.design)
	}
	switch {
	case f.n < 1:
		return fmt.Errorf("-replicas must be ≥ 1, have %d", f.n)
	case f.blocks < 0:
		return fmt.Errorf("-blocks must be ≥ 0 (0: the replica's default), have %d", f.blocks)
	case f.blockSize < 1:
		return fmt.Errorf("-block-size must be ≥ 1, have %d", f.blockSize)
	case f.startWait <= 0:
		return fmt.Errorf("-start-timeout must be > 0, have %v", f.startWait)
	}
	return nil
}

// validate refuses policy flags that could not work, before anything
// starts. names are the policies the command will build, given by flag.
func (p *policyFlags) validate(flag string, names ...string) error {
	for _, n := range names {
		if !slices.Contains(router.Policies, n) {
			return fmt.Errorf("%s: unknown policy %q (want one of %s)", flag, n, strings.Join(router.Policies, ", "))
		}
	}
	switch {
	case p.threshold < 0 || p.threshold > 1:
		return fmt.Errorf("-cache-threshold must be in [0, 1], have %v", p.threshold)
	case p.maxTree < 0:
		return fmt.Errorf("-max-tree-tokens must be ≥ 0 (0: no bound), have %d", p.maxTree)
	case p.health <= 0:
		return fmt.Errorf("-health-interval must be > 0, have %v", p.health)
	}
	return p.res.validate()
}

// start returns the replicas' URLs, starting them first unless they were
// given; events makes the started replicas publish their KV events. The
// flags are checked by validate, which the commands call before any work.
func (f *fleetFlags) start(ctx context.Context, events bool, log io.Writer) (urls []string, fleet *router.Fleet, err error) {
	if len(f.urls) > 0 {
		return f.urls, nil, nil
	}
	if err := f.validate(); err != nil {
		return nil, nil, err
	}
	d := router.Designs[f.design]
	bin, err := router.FindRunnable(d.Runnable, f.binDir)
	if err != nil {
		return nil, nil, err
	}
	var args []string
	if d.Cached {
		args = append(args, "-prefix-caching")
		if events {
			args = append(args, "-kv-events")
		}
	}
	if f.blocks > 0 {
		args = append(args, "-blocks="+strconv.Itoa(f.blocks))
	}
	args = append(args, "-block-size="+strconv.Itoa(f.blockSize))
	args = append(args, f.extra...)
	fmt.Fprintf(log, "starting %d replicas: %s serve %s (output in %s)\n", f.n, bin, strings.Join(args, " "), f.logDir)
	fleet, err = router.StartFleet(ctx, router.FleetOptions{Binary: bin, Args: args, N: f.n, LogDir: f.logDir, StartTimeout: f.startWait})
	if err != nil {
		return nil, nil, err
	}
	return fleet.URLs, fleet, nil
}

// policyFlags choose and tune the policy.
type policyFlags struct {
	threshold float64
	maxTree   int
	modelDir  string
	health    time.Duration
	// How the replicas name blocks in their KV events (serve's flags of
	// the same names): kv-events must hash prompts the same way.
	hashAlgo kvevents.HashAlgo
	hashSeed string
	lora     string
	// The router's timeouts, retries and ejection at the replicas.
	res resilienceFlags
}

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&p.threshold, "cache-threshold", 0.5, "prefix and kv-events: route by match only when the matched prefix is at least this fraction of the prompt; otherwise to the least-loaded replica")
	fs.IntVar(&p.maxTree, "max-tree-tokens", 1<<20, "prefix: tokens the radix tree remembers per replica before evicting its least recently routed leaves (0: no bound)")
	fs.StringVar(&p.modelDir, "model", "", "the replicas' model directory: the router reads its tokenizer, and replicas it starts serve it (default: the built-in model)")
	fs.DurationVar(&p.health, "health-interval", time.Second, "how often each replica's /health is polled")
	fs.TextVar(&p.hashAlgo, "prefix-caching-hash-algo", kvevents.SHA256CBOR, "kv-events: the replicas' block-hash algorithm (serve's flag): sha256, sha256_cbor, xxhash or xxhash_cbor")
	fs.StringVar(&p.hashSeed, "kv-hash-seed", kvevents.DefaultHashSeed, "kv-events: the replicas' -kv-hash-seed")
	fs.StringVar(&p.lora, "lora-name", "", "kv-events: the replicas' -lora-name")
	p.res.register(fs)
}

// tokenizer loads the model's tokenizer: text prompts and chats are routed
// on the token ids the replicas will compute from them.
func (p *policyFlags) tokenizer() (*tokenizer.Tokenizer, error) {
	dir := p.modelDir
	if dir == "" {
		var err error
		if dir, err = cli.DefaultModelDir(); err != nil {
			return nil, err
		}
	}
	return tokenizer.Load(dir)
}

// policySpec is a policy as -policy and -policies name it: a policy of
// router.Policies, and for prefix the modifiers +slots (name the slot too,
// on replicas with slots) and +warm (with +slots: move a request off its
// prefix's full replica and copy the prefix's slot over first).
type policySpec struct {
	name        string
	slots, warm bool
}

// parseSpec reads a policy spec: prefix, prefix+slots, prefix+slots+warm.
func parseSpec(s string) (policySpec, error) {
	parts := strings.Split(s, "+")
	ps := policySpec{name: parts[0]}
	for _, m := range parts[1:] {
		switch m {
		case "slots":
			ps.slots = true
		case "warm":
			ps.warm = true
		default:
			return ps, fmt.Errorf("policy %q: unknown modifier %q (want +slots or +slots+warm)", s, m)
		}
	}
	if (ps.slots || ps.warm) && ps.name != "prefix" {
		return ps, fmt.Errorf("policy %q: only prefix routes to slots", s)
	}
	if ps.warm && !ps.slots {
		return ps, fmt.Errorf("policy %q: +warm needs +slots", s)
	}
	return ps, nil
}

// newRouter builds the router over urls with the policy ps; slots > 0
// (replicas with that many slots, and ps.slots) makes it name the slot
// too. With kv-events it also subscribes to every replica's event stream
// until ctx ends.
func (p *policyFlags) newRouter(ctx context.Context, ps policySpec, urls []string, blockSize int, tok *tokenizer.Tokenizer, slots int) (*router.Router, *router.KVIndex, error) {
	var kv *router.KVIndex
	if ps.name == "kv-events" {
		kv = router.NewKVIndex(blockSize)
		kv.Hasher = kvevents.NewHasher(p.hashAlgo, p.hashSeed, p.lora)
	}
	var pol router.Policy
	var err error
	if ps.slots && slots > 0 {
		pol = router.NewPrefixSlots(p.threshold, p.maxTree, slots, ps.warm)
	} else {
		slots = 0
		pol, err = router.NewPolicy(ps.name, p.threshold, p.maxTree, kv)
	}
	if err != nil {
		return nil, nil, err
	}
	opts := router.Options{Replicas: urls, Policy: pol, Tokenizer: tok, HealthInterval: p.health, Slots: slots, WarmSlots: ps.warm}
	p.res.apply(&opts)
	rt, err := router.New(opts)
	if err != nil {
		return nil, nil, err
	}
	if kv != nil {
		rt.SubscribeAll(ctx, kv)
	}
	go rt.Run(ctx)
	return rt, kv, nil
}

// serve runs the router until ctx ends. ready, if not nil, gets the
// listening address.
func serve(ctx context.Context, args []string, ready func(string), log io.Writer) error {
	fs := flag.NewFlagSet("phase08_router serve", flag.ContinueOnError)
	fs.SetOutput(log)
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 8080, "port to listen on (0: any free port)")
	policy := fs.String("policy", "prefix", "routing policy: "+strings.Join(router.Policies, ", ")+"; prefix+slots and prefix+slots+warm with -slots")
	slots := fs.Int("slots", 0, "slots per replica (llama-server's -np): with -policy prefix+slots the router also picks the slot and sends it as id_slot; +warm copies a slot to a replica with a free one (the replicas must share --slot-save-path)")
	var ff fleetFlags
	ff.register(fs, 3, 0)
	var pf policyFlags
	pf.register(fs)
	limits := httpx.DefaultLimits() // the clients' side: -header-timeout, -timeout, -idle-timeout, -max-conns
	limits.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("-port must be in [0, 65535], have %d", *port)
	}
	ps, err := parseSpec(*policy)
	if err != nil {
		return fmt.Errorf("-policy: %w", err)
	}
	switch {
	case *slots < 0:
		return fmt.Errorf("-slots must be ≥ 0, have %d", *slots)
	case ps.slots && *slots == 0:
		return fmt.Errorf("-policy %s: give the replicas' slots with -slots", *policy)
	}
	if err := errors.Join(ff.validate(), pf.validate("-policy", ps.name), limits.Validate()); err != nil {
		return err
	}
	tok, err := pf.tokenizer()
	if err != nil {
		return err
	}
	if pf.modelDir != "" {
		ff.extra = append(ff.extra, "-model="+pf.modelDir)
	}
	urls, fleet, err := ff.start(ctx, ps.name == "kv-events", log)
	if err != nil {
		return err
	}
	if fleet != nil {
		defer func() {
			if err := fleet.Stop(45 * time.Second); err != nil {
				fmt.Fprintln(log, err)
			}
		}()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt, _, err := pf.newRouter(rctx, ps, urls, ff.blockSize, tok, *slots)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	srv := limits.Server(rt)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(limits.Listen(ln)) }()
	fmt.Fprintf(log, "phase08_router serve: listening on http://%s, policy %s, replicas %s\n", ln.Addr(), *policy, strings.Join(urls, " "))
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	return srv.Shutdown(sctx)
}

// Command phase08_leak shows that a shared prefix cache is a side channel,
// that cache salts close it, what they cost, and how a per-tenant cache
// share keeps a noisy tenant from evicting a quiet one's prefixes.
//
//	phase08_leak                       every experiment, built-in model (about a minute on 2 cores)
//	phase08_leak -secret 2048 -trials 20
//
// The attack and the cost run against `phase08_prefix serve -prefix-caching`
// servers started in this process on loopback ports: every request crosses
// a real TCP socket and is timed where the client reads its first chunk.
// The noisy neighbour runs each design's engine step by step in this
// process, so its numbers repeat exactly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"kvlab/common/cli"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/kernels/cpu"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_leak/leak"
	"kvlab/phase08_prefix/radix"
)

// options are the command line.
type options struct {
	modelDir string
	leak     leak.LeakConfig
	cost     leak.CostConfig
	noisy    leak.NoisyConfig
	share    float64
	only     string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return
	case errors.Is(err, errUsage):
		os.Exit(2) // the flag package has said why
	}
	fmt.Fprintln(os.Stderr, "phase08_leak:", err)
	os.Exit(1)
}

// errUsage is a command line the flag package refused and explained.
var errUsage = errors.New("usage")

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("phase08_leak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.modelDir, "model", "", "model directory; empty: the built-in synthetic model")
	fs.IntVar(&o.leak.Secret, "secret", 1024, "tokens of the victim's secret system prompt")
	fs.IntVar(&o.leak.Calibrate, "calibrate", 6, "right/wrong guess pairs the attacker learns its threshold on")
	fs.IntVar(&o.leak.Trials, "trials", 10, "held-out right/wrong guess pairs the threshold is judged on")
	fs.IntVar(&o.cost.Tenants, "tenants", 4, "tenants of the shared-prompt service")
	fs.IntVar(&o.cost.PerTenant, "per-tenant", 3, "requests per tenant in the cost workload")
	fs.IntVar(&o.cost.System, "system", 512, "tokens of the shared system prompt")
	fs.IntVar(&o.cost.Question, "question", 32, "tokens of each request's own question")
	fs.IntVar(&o.noisy.Blocks, "noisy-blocks", 48, "KV pool blocks of the noisy-neighbour engine")
	fs.IntVar(&o.noisy.System, "noisy-system", 128, "tokens of the quiet tenant's system prompt")
	fs.IntVar(&o.noisy.Flood, "flood", 8, "unique prompts the noisy tenant sends per round")
	fs.IntVar(&o.noisy.FloodLen, "flood-len", 160, "tokens of each noisy prompt")
	fs.IntVar(&o.noisy.Rounds, "rounds", 8, "rounds of the noisy-neighbour workload")
	fs.Float64Var(&o.share, "tenant-cache-share", 0.5, "the cap the noisy-neighbour run compares with no cap")
	fs.StringVar(&o.only, "only", "", "run one experiment: leak, cost or noisy (default: all)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	o.leak.Seed, o.cost.Seed, o.noisy.Seed = 1, 2, 3
	o.noisy.BlockSize, o.noisy.Question = 16, 16
	for _, c := range []struct {
		flag     string
		have, at int
	}{
		{"-secret", o.leak.Secret, 16}, // one block
		{"-calibrate", o.leak.Calibrate, 1},
		{"-trials", o.leak.Trials, 1},
		{"-tenants", o.cost.Tenants, 1},
		{"-per-tenant", o.cost.PerTenant, 1},
		{"-system", o.cost.System, 1},
		{"-question", o.cost.Question, 1},
		{"-noisy-blocks", o.noisy.Blocks, 1},
		{"-noisy-system", o.noisy.System, 1},
		{"-flood", o.noisy.Flood, 1},
		{"-flood-len", o.noisy.FloodLen, 1},
		{"-rounds", o.noisy.Rounds, 1},
	} {
		if c.have < c.at {
			return o, fmt.Errorf("%s must be ≥ %d, have %d", c.flag, c.at, c.have)
		}
	}
	switch {
	case o.share <= 0 || o.share > 1:
		return o, fmt.Errorf("-tenant-cache-share must be in (0, 1]")
	case o.only != "" && o.only != "leak" && o.only != "cost" && o.only != "noisy":
		return o, fmt.Errorf("-only is leak, cost or noisy, not %q", o.only)
	}
	return o, nil
}

// server is the runnable the attack and the cost run against.
var server = cli.Variant{Name: "phase08_prefix", PrefixCache: radix.New}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	serveArgs := []string{"-prefix-caching"}
	if o.modelDir != "" {
		serveArgs = append(serveArgs, "-model", o.modelDir)
	}
	machine := fmt.Sprintf("measured on %d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	if o.only == "" || o.only == "leak" {
		if err := runLeak(ctx, o, serveArgs, machine, stdout); err != nil {
			return err
		}
	}
	if o.only == "" || o.only == "cost" {
		if err := runCost(ctx, o, serveArgs, stdout); err != nil {
			return err
		}
	}
	if o.only == "" || o.only == "noisy" {
		return runNoisy(o, stdout)
	}
	return nil
}

// fresh runs f against a server of its own, so no run sees another's cache.
func fresh(ctx context.Context, args []string, f func(leak.Client) error) error {
	s, err := leak.StartServer(ctx, server, args, io.Discard)
	if err != nil {
		return err
	}
	if err := f(s.Client()); err != nil {
		s.Stop()
		return err
	}
	return s.Stop()
}

func runLeak(ctx context.Context, o options, args []string, machine string, w io.Writer) error {
	fmt.Fprintf(w, "== The side channel: the attacker's own TTFT over HTTP, phase08_prefix serve -prefix-caching\n")
	fmt.Fprintf(w, "   secret system prompt %d tokens; threshold = midpoint of the medians of %d calibration pairs; %d held-out pairs; %s\n\n",
		o.leak.Secret, o.leak.Calibrate, o.leak.Trials, machine)
	fmt.Fprintln(w, "| cache salts | right guess TTFT p50 | wrong guess TTFT p50 | threshold | held-out accuracy | right guess cached_tokens (min) | wrong guess cached_tokens (max) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, mode := range []struct{ name, victim, attacker string }{
		{"none", "", ""},
		{"one per tenant", "tenant-victim", "tenant-attacker"},
	} {
		err := fresh(ctx, args, func(c leak.Client) error {
			r, err := leak.Attack(ctx, c, mode.victim, mode.attacker, o.leak)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %d/%d (%.0f%%) | %d | %d |\n", mode.name, ms(r.RightP50), ms(r.WrongP50), ms(r.Threshold),
				r.Correct, r.Judged, 100*r.Accuracy(), r.RightCached, r.WrongCached)
			return nil
		})
		if err != nil {
			return fmt.Errorf("attack, salts %s: %w", mode.name, err)
		}
	}
	fmt.Fprintln(w)
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func runCost(ctx context.Context, o options, args []string, w io.Writer) error {
	fmt.Fprintf(w, "== What salting costs: %d tenants × %d requests, each a shared %d-token system prompt + its own %d-token question, one at a time, fresh server each\n\n",
		o.cost.Tenants, o.cost.PerTenant, o.cost.System, o.cost.Question)
	fmt.Fprintln(w, "| cache salts | prompt tokens | cached tokens | fleet hit rate |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, p := range leak.SaltPolicies {
		err := fresh(ctx, args, func(c leak.Client) error {
			u, err := leak.Cost(ctx, c, p, o.cost)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "| %s | %d | %d | %.1f%% |\n", p.Name, u.Prompt, u.Cached, 100*u.HitRate())
			return nil
		})
		if err != nil {
			return fmt.Errorf("cost, %s: %w", p.Name, err)
		}
	}
	fmt.Fprintln(w)
	return nil
}

// designs are the three prefix caches, for the noisy neighbour.
var designs = []struct {
	name string
	f    func(*kvcache.Allocator, int) kvcache.PrefixCache
}{
	{"radix tree (prefix)", radix.New},
	{"hash + CoW (hashcow)", blockhash.PrefixCache},
	{"compressed trie", trie.PrefixCache},
}

func runNoisy(o options, w io.Writer) error {
	dir := o.modelDir
	if dir == "" {
		var err error
		if dir, err = cli.DefaultModelDir(); err != nil {
			return err
		}
	}
	m, err := model.Load(dir, cpu.New())
	if err != nil {
		return err
	}
	n := o.noisy
	fmt.Fprintf(w, "== Noisy neighbour: %d-block pool (%d tokens a block); %d rounds of 1 quiet request (a %d-token system prompt + %d-token question) and %d unique %d-token noisy prompts, at the same step; engine stepped in process\n\n",
		n.Blocks, n.BlockSize, n.Rounds, n.System, n.Question, n.Flood, n.FloodLen)
	fmt.Fprintf(w, "| design | quiet hit rate, no cap | quiet hit rate, -tenant-cache-share %g | noisy hit rate, no cap | noisy hit rate, capped |\n", o.share)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, d := range designs {
		q0, n0, err := leak.Noisy(m, d.f, 0, n)
		if err != nil {
			return fmt.Errorf("%s, no cap: %w", d.name, err)
		}
		q1, n1, err := leak.Noisy(m, d.f, o.share, n)
		if err != nil {
			return fmt.Errorf("%s, capped: %w", d.name, err)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", d.name, rate(q0), rate(q1), rate(n0), rate(n1))
	}
	fmt.Fprintln(w)
	return nil
}

func rate(u leak.Usage) string {
	return fmt.Sprintf("%.1f%% (%d/%d)", 100*u.HitRate(), u.Cached, u.Prompt)
}

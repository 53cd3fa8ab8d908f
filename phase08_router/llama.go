package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvlab/common/cli"
	"kvlab/common/metrics"
	"kvlab/common/model/gguf"
	"kvlab/common/tokenizer"
	"kvlab/common/workload"
	"kvlab/phase08_router/router"
)

// llamaPolicies are bench's default policies in front of llama-server:
// kv-events is out (llama-server publishes no KV events), and prefix comes
// three ways: the replica only, the replica and its slot, and the slot
// with warm-ups.
var llamaPolicies = []string{"round-robin", "least-load", "prefix", "prefix+slots", "prefix+slots+warm"}

// The llama-server run's workload defaults: four system prompts over three
// replicas of two slots, so that one replica must hold two of them, and
// 48 conversations starting 16 a second, so that requests overlap and the
// slots are contended (llama-server answers one of these requests in tens
// of milliseconds; at the serve run's 4 a second every slot is idle when
// the next turn comes, and the slot choice cannot matter).
const (
	llamaSystemPrompts = 4
	llamaConversations = 48
	llamaRPS           = 16
)

// llamaFlags describe a fleet of llama-server replicas for bench.
type llamaFlags struct {
	dir     string
	gguf    string
	slots   int
	ctx     int
	threads int
	extra   multiFlag
	work    string
}

func (l *llamaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.dir, "llama-cpp", "", "a llama.cpp build (its llama-server in build/bin, bin or the folder itself): the replicas are llama-server processes instead of this project's serve (make phase08-router passes $LLAMA_CPP_DIR)")
	fs.StringVar(&l.gguf, "gguf", "", "with -llama-cpp, the model file the replicas load (default: the built-in model, exported to GGUF in -llama-work)")
	fs.IntVar(&l.slots, "slots", 2, "with -llama-cpp, each replica's slots (-np)")
	fs.IntVar(&l.ctx, "ctx", 8192, "with -llama-cpp, each replica's context (-c), shared by its slots")
	fs.IntVar(&l.threads, "threads", 1, "with -llama-cpp, each replica's threads (-t)")
	fs.Var(&l.extra, "llama-arg", "with -llama-cpp, one more argument for every llama-server (repeatable)")
	fs.StringVar(&l.work, "llama-work", filepath.Join("out", "phase08-router-llama"), "with -llama-cpp, the folder for the exported model and the replicas' shared --slot-save-path")
}

func (l *llamaFlags) validate(on bool) error {
	if !on {
		return nil
	}
	switch {
	case l.slots < 1:
		return fmt.Errorf("-slots must be ≥ 1, have %d", l.slots)
	case l.ctx < 0:
		return fmt.Errorf("-ctx must be ≥ 0 (0: the model's), have %d", l.ctx)
	case l.threads < 1:
		return fmt.Errorf("-threads must be ≥ 1, have %d", l.threads)
	}
	return nil
}

// findLlamaServer returns the llama-server binary of the llama.cpp build in
// dir.
func findLlamaServer(dir string) (string, error) {
	for _, sub := range []string{"build/bin", "bin", "."} {
		p := filepath.Join(dir, sub, "llama-server")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no llama-server under %s (looked in build/bin, bin and the folder itself); build it with cmake --build build --target llama-server", dir)
}

// backend returns the bench's backend over fresh llama-server replicas:
// ff.n of them, each with l.slots slots, on one GGUF model, sharing one
// --slot-save-path (emptied before each policy's run) so that a slot saved
// on one can be restored on another.
func (l *llamaFlags) backend(ctx context.Context, ff *fleetFlags, pf *policyFlags, tok *tokenizer.Tokenizer, timeout time.Duration, log io.Writer) (backend, error) {
	bin, err := findLlamaServer(l.dir)
	if err != nil {
		return backend{}, err
	}
	if err := os.MkdirAll(l.work, 0o755); err != nil {
		return backend{}, err
	}
	model := l.gguf
	if model == "" {
		dir := pf.modelDir
		if dir == "" {
			if dir, err = cli.DefaultModelDir(); err != nil {
				return backend{}, err
			}
		}
		model = filepath.Join(l.work, "model.gguf")
		if _, err := gguf.ExportFile(dir, model); err != nil {
			return backend{}, fmt.Errorf("exporting %s to GGUF: %w", dir, err)
		}
		fmt.Fprintf(log, "exported %s to %s\n", dir, model)
	}
	saveDir := filepath.Join(l.work, "slots")
	args := func(i, port int) []string {
		a := []string{"-m", model, "-np", strconv.Itoa(l.slots), "--metrics", "--slot-save-path", saveDir,
			"--host", "127.0.0.1", "--port", strconv.Itoa(port), "-c", strconv.Itoa(l.ctx), "-t", strconv.Itoa(l.threads), "--no-webui"}
		return append(a, l.extra...)
	}
	fmt.Fprintf(log, "replicas: %s %s\n", bin, strings.Join(args(0, 0), " "))
	ban := nonUTF8Tokens(tok)
	fmt.Fprintf(log, "requests: POST /completion, greedy, ignore_eos, return_tokens, %d tokens that are not UTF-8 alone banned by logit_bias\n", len(ban))
	return backend{
		start: func(ctx context.Context, _ bool) ([]string, func() error, error) {
			if err := os.RemoveAll(saveDir); err != nil {
				return nil, nil, err
			}
			if err := os.MkdirAll(saveDir, 0o755); err != nil {
				return nil, nil, err
			}
			fleet, err := router.StartFleet(ctx, router.FleetOptions{Binary: bin, Command: args, N: ff.n, LogDir: ff.logDir, StartTimeout: ff.startWait})
			if err != nil {
				return nil, nil, err
			}
			return fleet.URLs, func() error { return fleet.Stop(45 * time.Second) }, nil
		},
		engine: func(ctx context.Context, url string) (workload.Engine, func()) {
			e := newLlamaEngine(ctx, url, timeout, ban)
			return e, e.Close
		},
		slots: l.slots,
	}, nil
}

// checkLlamaRows fails on any failed request. llama-server keeps no prefix
// hit counter to check the router's sum against, and its greedy outputs
// may differ between policies (a prompt computed whole or on top of a
// reused prefix sums in another order, and a near tie can flip), so those
// are reported, not required.
func checkLlamaRows(stdout io.Writer, rows []Row, runs []*metrics.Run) error {
	for _, r := range rows {
		if r.Failed > 0 {
			return fmt.Errorf("%s: %d of %d requests failed (see -json)", r.Policy, r.Failed, r.Requests)
		}
	}
	fmt.Fprintln(stdout, "cached: the replicas' timings.cache_n (prompt tokens found in the slot) summed at the router")
	if len(runs) > 1 {
		same := 0
		for j, r := range runs[0].Requests {
			all := true
			for _, run := range runs[1:] {
				all = all && slices.Equal(run.Requests[j].Output, r.Output)
			}
			if all {
				same++
			}
		}
		fmt.Fprintf(stdout, "outputs: %d of %d requests generated the same tokens under every policy (greedy, ignore_eos)\n", same, len(runs[0].Requests))
	}
	return nil
}

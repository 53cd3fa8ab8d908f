package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"kvlab/common/engine"
	"kvlab/common/trace"
)

// traceFlags are generate's and bench's -trace and -trace-dump.
type traceFlags struct {
	on, dump bool
	out      io.Writer // where the trace goes: stderr, so stdout stays the command's output
}

// traceMode is the -trace flag: -trace (one line per event) or -trace=full
// (with the pool and the cache drawn after every step).
type traceMode struct{ f *traceFlags }

func (m traceMode) String() string {
	switch {
	case m.f == nil || !m.f.on:
		return "false"
	case m.f.dump:
		return "full"
	}
	return "true"
}

func (m traceMode) Set(s string) error {
	if s == "full" {
		m.f.on, m.f.dump = true, true
		return nil
	}
	on, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true, false or full")
	}
	m.f.on = on
	return nil
}

func (traceMode) IsBoolFlag() bool { return true }

func (f *traceFlags) register(fs *flag.FlagSet, out io.Writer) {
	f.out = out
	fs.Var(traceMode{f}, "trace", "print on stderr, per engine step, the plan and every prefix-cache match, commit, eviction and copy-on-write, one line each; -trace=full also draws the pool and the cache after every step")
	fs.BoolVar(&f.dump, "trace-dump", false, "with -trace, draw the pool (free / held / cached blocks, page tables) and the cache's structure after every step (same as -trace=full)")
}

// apply sets c.Trace when -trace is on.
func (f *traceFlags) apply(c *engine.Config) {
	if f.on || f.dump {
		c.Trace = trace.New(f.out, f.dump)
	}
}

// runTraceExample runs the worked example of the docs (docs/phase08_trace.md)
// through this runnable's prefix cache and prints its full trace.
func runTraceExample(v Variant, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(v, "trace-example", stderr)
	var rf runtimeFlags
	rf.register(fs, v)
	ex := trace.WorkedExampleConfig()
	for name, val := range map[string]int{"block-size": ex.BlockSize, "blocks": ex.NumBlocks, "max-batch-tokens": ex.MaxBatchTokens, "max-running": ex.MaxRunning} {
		if err := fs.Set(name, strconv.Itoa(val)); err != nil {
			return err
		}
	}
	rf.eng.Audit = ex.Audit
	svg := fs.String("svg", "", "also draw the steps as an SVG figure sequence into this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if v.PrefixCache == nil {
		return fmt.Errorf("trace-example shows a prefix cache at work, and %s has none: run it from phase08_prefix, phase08_hashcow or phase08_compressed", v.Name)
	}
	m, err := rf.loadModel()
	if err != nil {
		return err
	}
	defer m.Close() // unmaps the weights; the engines, closed by later defers, go first
	cfg, err := rf.engineConfig(v)
	if err != nil {
		return err
	}
	tw := trace.New(stdout, true)
	if *svg != "" {
		tw.Record()
	}
	cfg.Trace = tw
	e, err := engine.New(m, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := trace.RunWorkedExample(e, stdout); err != nil {
		return err
	}
	if *svg != "" {
		if err := os.WriteFile(*svg, tw.Figure(v.Name+": the worked example, step by step"), 0o644); err != nil {
			return err
		}
	}
	return tw.Err()
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"kvlab/common/engine"
	"kvlab/common/metrics"
	"kvlab/common/workload"
)

// Compare runs the baseline engine and every variant in one process on the
// same requests and arrivals, checks that each variant produced exactly the
// baseline's tokens, prints one table, and writes an SVG plot of TTFT per
// request. It returns the process exit code.
func Compare(variants []Variant, args []string, stdout, stderr io.Writer) int {
	err := compare(variants, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
}

func compare(variants []Variant, args []string, stdout, stderr io.Writer) error {
	name := workloadName(args)
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf runtimeFlags
	rf.register(fs, Variant{})
	admission := fs.String("admission", "cost-aware", "how admission charges a prompt: conservative or cost-aware")
	fs.String("workload", name, "workload: "+strings.Join(workload.Names(), ", "))
	p := BenchDefaults(name)
	p.RegisterFlags(fs)
	plotPath := fs.String("plot", filepath.Join("out", "phase08-"+name+".svg"), "where to write the SVG plot of TTFT per request")
	jsonPath := fs.String("json", "", "also write every run's summary and per-request records as JSON")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := parse(fs, args); err != nil {
		return err
	}
	rf.admission = *admission
	stop, err := rf.startProfiles()
	if err != nil {
		return err
	}
	defer stop()
	m, err := rf.loadModel()
	if err != nil {
		return err
	}
	if p.Vocab == 0 {
		p.Vocab = m.Config.VocabSize
	}
	reqs, err := workload.Generate(name, p)
	if err != nil {
		return err
	}
	base, err := rf.engineConfig(Variant{})
	if err != nil {
		return err
	}
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}

	configs := []struct {
		name string
		cfg  engine.Config
	}{{"baseline", base}}
	for _, v := range variants {
		c := base
		c.PrefixCache = v.PrefixCache
		configs = append(configs, struct {
			name string
			cfg  engine.Config
		}{v.Name, c})
	}
	var runs []*metrics.Run
	for i, c := range configs {
		// Start each configuration from a collected heap, so one run's
		// garbage is not billed to the next.
		runtime.GC()
		fmt.Fprintf(stderr, "[%d/%d] %s: %s, %d requests\n", i+1, len(configs), c.name, name, len(reqs))
		run, err := benchOne(m, c.cfg, c.name, reqs, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		runs = append(runs, run)
	}

	var rows []metrics.Summary
	for _, r := range runs {
		rows = append(rows, r.Summary())
	}
	metrics.WriteTable(stdout, rows)
	if *jsonPath != "" {
		if err := writeFile(*jsonPath, func(w io.Writer) error { return metrics.WriteJSON(w, runs) }); err != nil {
			return err
		}
	}
	if *plotPath != "" {
		if err := os.MkdirAll(filepath.Dir(*plotPath), 0o755); err != nil {
			return err
		}
		title := fmt.Sprintf("TTFT per request, %s (%d requests)", name, len(reqs))
		if err := writeFile(*plotPath, func(w io.Writer) error { return metrics.WriteTTFTPlot(w, runs, title) }); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nTTFT plot: %s\n", *plotPath)
	}
	if err := sameOutputs(runs); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "outputs: every variant generated exactly the baseline's tokens for all %d requests\n", len(reqs))
	return nil
}

// sameOutputs checks every run against the first, request by request.
func sameOutputs(runs []*metrics.Run) error {
	want := map[int][]int32{}
	for _, r := range runs[0].Requests {
		if r.Err != "" {
			return fmt.Errorf("%s: request %d failed: %s", runs[0].Name, r.ID, r.Err)
		}
		want[r.ID] = r.Output
	}
	for _, run := range runs[1:] {
		for _, r := range run.Requests {
			if r.Err != "" {
				return fmt.Errorf("%s: request %d failed: %s", run.Name, r.ID, r.Err)
			}
			if !slices.Equal(r.Output, want[r.ID]) {
				return fmt.Errorf("%s: request %d generated %v; the baseline generated %v", run.Name, r.ID, r.Output, want[r.ID])
			}
		}
	}
	return nil
}

package cli

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"kvlab/common/engine"
	"kvlab/common/metrics"
	"kvlab/common/model"
	"kvlab/common/workload"
)

// namedConfig is one engine configuration of a comparison.
type namedConfig struct {
	name string
	cfg  engine.Config
}

// runConfigs serves reqs once per configuration, each on a fresh engine
// and with the same arrival times, and returns the runs in order.
// newClock gives each run its clock (nil: the wall clock).
func runConfigs(m *model.Model, configs []namedConfig, workloadName string, reqs []workload.Request, newClock func() workload.Clock, progress, log io.Writer) ([]*metrics.Run, error) {
	return runNumbered(m, configs, workloadName, reqs, newClock, progress, log, 0, len(configs))
}

// runNumbered is runConfigs for configurations from+1… of a series of
// total runs, which is how its log numbers them.
func runNumbered(m *model.Model, configs []namedConfig, workloadName string, reqs []workload.Request, newClock func() workload.Clock, progress, log io.Writer, from, total int) ([]*metrics.Run, error) {
	var runs []*metrics.Run
	for i, c := range configs {
		// Start each configuration from a collected heap, so one run's
		// garbage is not billed to the next.
		runtime.GC()
		fmt.Fprintf(log, "[%d/%d] %s: %s, %d requests\n", from+i+1, total, c.name, workloadName, len(reqs))
		run, err := benchOne(m, c.cfg, c.name, reqs, newClock(), progress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// reportOptions says what report writes besides the table.
type reportOptions struct {
	// what names what was served, for the plots' titles:
	// "prefix_caching (200 requests)".
	what     string
	jsonPath string
	// plotPath is the TTFT-per-request plot; the CDF and prefill plots go
	// beside it (see plotPaths).
	plotPath string
	// wide prints every column of the table, not only those the comparison
	// is read by.
	wide bool
	// note is printed under the table (which clock the times come from).
	note string
}

// plotPaths derives the TTFT CDF's and the prefill plot's files from the
// TTFT plot's: out/ttft.svg gives out/ttft-cdf.svg and out/ttft-prefill.svg.
func plotPaths(plotPath string) (cdf, prefill string) {
	ext := filepath.Ext(plotPath)
	if ext == "" {
		ext = ".svg"
	}
	base := strings.TrimSuffix(plotPath, filepath.Ext(plotPath))
	return base + "-cdf" + ext, base + "-prefill" + ext
}

// report prints the table of runs, writes the JSON and the plots when their
// paths are set, and returns an error if any request failed or, with
// several runs, if any run's tokens differ from the first run's.
func report(stdout io.Writer, runs []*metrics.Run, o reportOptions) error {
	var rows []metrics.Summary
	for _, r := range runs {
		rows = append(rows, r.Summary())
	}
	if o.wide {
		metrics.WriteWideTable(stdout, rows)
	} else {
		metrics.WriteTable(stdout, rows)
	}
	if o.note != "" {
		fmt.Fprintln(stdout, o.note)
	}
	if o.jsonPath != "" {
		if err := writeFile(o.jsonPath, func(w io.Writer) error { return metrics.WriteJSON(w, runs) }); err != nil {
			return err
		}
	}
	if o.plotPath != "" {
		cdfPath, prefillPath := plotPaths(o.plotPath)
		plots := []struct {
			label, path string
			write       func(io.Writer, []*metrics.Run, string) error
			title       string
		}{
			{"TTFT plot", o.plotPath, metrics.WriteTTFTPlot, "TTFT per request, " + o.what},
			{"TTFT CDF", cdfPath, metrics.WriteTTFTCDF, "TTFT distribution, " + o.what},
			{"prefill plot", prefillPath, metrics.WritePrefillPlot, "Prompt tokens computed, " + o.what},
		}
		fmt.Fprintln(stdout)
		for _, p := range plots {
			if err := writeFile(p.path, func(w io.Writer) error { return p.write(w, runs, p.title) }); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: %s\n", p.label, p.path)
		}
	}
	failed := false
	for _, r := range runs {
		for _, line := range failureReasons(r) {
			if !failed {
				fmt.Fprintln(stdout, "\nfailed requests, by reason:")
				failed = true
			}
			fmt.Fprintf(stdout, "  %s: %s\n", r.Name, line)
		}
	}
	for _, r := range rows {
		if r.Failed > 0 {
			return fmt.Errorf("%s: %d of %d requests failed (reasons above; every record is in -json)", r.Name, r.Failed, r.Requests)
		}
	}
	if len(runs) > 1 {
		if err := sameOutputs(runs); err != nil {
			return err
		}
		var names []string
		for _, r := range runs[1:] {
			names = append(names, r.Name)
		}
		what := fmt.Sprintf("generated exactly the %s's tokens for all %d requests", runs[0].Name, len(runs[0].Requests))
		writeNamed(stdout, "outputs:", what, names)
	}
	return nil
}

// writeNamed prints a line saying that names did what: "outputs: design
// generated …" for one name; for several, what on the first line and each
// name on one of its own, so that three designs' names, or servers' URLs,
// do not run the line past 120 columns.
func writeNamed(w io.Writer, label, what string, names []string) {
	if len(names) == 1 {
		fmt.Fprintf(w, "%s %s %s\n", label, names[0], what)
		return
	}
	fmt.Fprintf(w, "%s %s:\n", label, what)
	for _, n := range names {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// requestPrefix matches the "engine: request 7: " in front of an error,
// which differs between requests failing for the same reason.
var requestPrefix = regexp.MustCompile(`^(engine: )?request \d+: `)

var digits = regexp.MustCompile(`\d+`)

// failureReasons groups run's failed requests by their error with the
// numbers left out, most frequent first, and shows the first error of each
// group: "3 × prompt of 900 tokens leaves no room … (numbers vary)".
func failureReasons(run *metrics.Run) []string {
	type group struct {
		first  string
		n      int
		varied bool
	}
	groups := map[string]*group{}
	var order []string
	for _, q := range run.Requests {
		if !q.Failed() {
			continue
		}
		msg := requestPrefix.ReplaceAllString(q.Err, "")
		key := digits.ReplaceAllString(msg, "#")
		g := groups[key]
		if g == nil {
			g = &group{first: msg}
			groups[key] = g
			order = append(order, key)
		}
		g.n++
		g.varied = g.varied || msg != g.first
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(groups[b].n, groups[a].n) })
	lines := make([]string, len(order))
	for i, k := range order {
		g := groups[k]
		lines[i] = fmt.Sprintf("%d × %s", g.n, g.first)
		if g.varied {
			lines[i] += " (numbers vary)"
		}
	}
	return lines
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
				return fmt.Errorf("%s: request %d generated %v; the %s generated %v", run.Name, r.ID, r.Output, runs[0].Name, want[r.ID])
			}
		}
	}
	return nil
}

// writeFile creates path (and its folder) and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

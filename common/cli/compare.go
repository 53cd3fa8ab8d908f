package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"kvlab/common/workload"
)

// Compare runs the baseline engine and every variant in one process on the
// same requests and arrivals, prints one table, writes an SVG plot of TTFT
// per request, and fails unless each variant produced exactly the
// baseline's tokens. It returns the process exit code.
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

	configs := []namedConfig{{"baseline", base}}
	for _, v := range variants {
		c := base
		c.PrefixCache = v.PrefixCache
		configs = append(configs, namedConfig{v.Name, c})
	}
	runs, err := runConfigs(m, configs, name, reqs, progress, stderr)
	if err != nil {
		return err
	}
	return report(stdout, runs, fmt.Sprintf("TTFT per request, %s (%d requests)", name, len(reqs)), *jsonPath, *plotPath)
}

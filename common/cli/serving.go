package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"kvlab/common/model"
	"kvlab/common/workload"
)

// servingFlags are the flags of the commands that serve a workload: which
// one, its parameters, and where the results go.
type servingFlags struct {
	name     string
	params   workload.Params
	jsonPath string
	plotPath string
	quiet    bool
}

// register adds the flags to fs. The workload's own defaults depend on its
// name, which is itself a flag, so args are scanned for it first.
func (f *servingFlags) register(fs *flag.FlagSet, args []string, defaultPlot string) {
	f.name = workloadName(args)
	fs.String("workload", f.name, "workload: "+strings.Join(workload.Names(), ", "))
	f.params = BenchDefaults(f.name)
	f.params.RegisterFlags(fs)
	fs.StringVar(&f.jsonPath, "json", "", "also write every run's summary and per-request records as JSON to this file")
	fs.StringVar(&f.plotPath, "plot", defaultPlot, "write an SVG plot of TTFT per request to this file (empty: none)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
}

// load loads the model and generates the workload's requests for it.
func (f *servingFlags) load(rf *runtimeFlags) (*model.Model, []workload.Request, error) {
	m, err := rf.loadModel()
	if err != nil {
		return nil, nil, err
	}
	p := f.params
	if p.Vocab == 0 {
		p.Vocab = m.Config.VocabSize
	}
	reqs, err := workload.Generate(f.name, p)
	if err != nil {
		return nil, nil, err
	}
	return m, reqs, nil
}

// serve runs every configuration on the same requests and reports them.
func (f *servingFlags) serve(m *model.Model, configs []namedConfig, reqs []workload.Request, stdout, stderr io.Writer) error {
	var progress io.Writer = stderr
	if f.quiet {
		progress = nil
	}
	runs, err := runConfigs(m, configs, f.name, reqs, progress, stderr)
	if err != nil {
		return err
	}
	return report(stdout, runs, fmt.Sprintf("TTFT per request, %s (%d requests)", f.name, len(reqs)), f.jsonPath, f.plotPath)
}

package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"kvlab/common/metrics"
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
	// plotStem, when set, names the default plot after what ran (see
	// plotName): -plot's default is filled in once the flags are parsed.
	// plotWhat is the workload, or the experiment, in that name.
	plotStem, plotWhat string
	wide               bool
	quiet              bool
	clock              string
}

// register adds the flags to fs. The workload's own defaults depend on its
// name, which is itself a flag, so args are scanned for it first. A
// non-empty plotStem gives -plot a default named by what ran (plotName),
// which resolvePlot fills in after parsing; empty, no plot by default.
func (f *servingFlags) register(fs *flag.FlagSet, args []string, plotStem string) {
	f.name = workloadName(args)
	fs.String("workload", f.name, "workload: "+strings.Join(workload.Names(), ", "))
	f.params = BenchDefaults(f.name)
	f.params.RegisterFlags(fs)
	fs.StringVar(&f.jsonPath, "json", "", "also write every run's summary and per-request records as JSON to this file")
	f.plotStem, f.plotWhat = plotStem, f.name
	defaultPlot := ""
	if plotStem != "" {
		defaultPlot = filepath.Join("out", plotStem+"-MODEL-"+f.name+".svg")
	}
	fs.StringVar(&f.plotPath, "plot", defaultPlot, "write an SVG plot of TTFT per request to this file, and beside it the TTFT CDF (NAME-cdf.svg) and the prompt tokens computed against the optimum (NAME-prefill.svg) (empty: none; MODEL in the default is -arch, or -model's folder name, and -device when not cpu)")
	fs.BoolVar(&f.wide, "wide", false, "print every column of the table (about 220 characters wide), not only those the comparison is read by; the JSON has them all")
	fs.StringVar(&f.clock, "clock", "wall", "wall, or step:DURATION (e.g. step:5ms): a virtual clock that advances DURATION per engine step, so arrivals interleave with steps the same way on every machine and every count is reproducible (times are then virtual, not measured)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar (it is drawn only when stderr is a terminal)")
}

// resolvePlot fills in -plot's default, named by what ran, unless the
// command line set -plot itself.
func (f *servingFlags) resolvePlot(fs *flag.FlagSet, rf *runtimeFlags) {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "plot" })
	if !set && f.plotStem != "" {
		f.plotPath = plotName(f.plotStem, rf, f.plotWhat)
	}
}

// plotName is out/STEM-MODEL-WHAT.svg: MODEL is the built-in model's -arch
// or the -model folder's name, followed by -device when it is not cpu, so
// that runs of other models, devices or workloads keep their own plots
// instead of overwriting one another's.
func plotName(stem string, rf *runtimeFlags, what string) string {
	m := rf.builtinArch()
	if rf.modelDir != "" {
		m = filepath.Base(filepath.Clean(rf.modelDir))
		if m == "." || m == string(filepath.Separator) {
			m = "model"
		}
	}
	if rf.device != "" && rf.device != "cpu" {
		m += "-" + rf.device
	}
	return filepath.Join("out", stem+"-"+m+"-"+what+".svg")
}

// load generates the workload's requests for the model and loads it.
// Requests the model could never serve — token ids outside its vocabulary,
// prompts longer than the context — are refused here, before any work.
func (f *servingFlags) load(rf *runtimeFlags) (*model.Model, []workload.Request, error) {
	dir, err := rf.dir()
	if err != nil {
		return nil, nil, err
	}
	mc, err := model.LoadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	p := f.params
	if p.Vocab == 0 {
		p.Vocab = mc.VocabSize
	}
	if p.Vocab > mc.VocabSize {
		return nil, nil, fmt.Errorf("-vocab %d: the model's vocabulary has only %d tokens", p.Vocab, mc.VocabSize)
	}
	reqs, err := workload.Generate(f.name, p)
	if err != nil {
		return nil, nil, err
	}
	context := rf.eng.ContextLimit(mc.MaxPositionEmbeddings)
	longest := 0
	for _, r := range reqs {
		longest = max(longest, len(r.Prompt))
	}
	if longest >= context {
		return nil, nil, fmt.Errorf("-prefix-len, -suffix-max, -long-len: the longest prompt has %d tokens, leaving no room to generate in the context of %d (-max-context, or the model's max_position_embeddings)", longest, context)
	}
	m, err := rf.loadModel()
	if err != nil {
		return nil, nil, err
	}
	return m, reqs, nil
}

// progress returns where the progress bar goes: stderr when it is a
// terminal, nowhere with -quiet or when stderr is a file or a pipe (a bar
// redrawn with carriage returns is noise in a log; the one line per
// configuration that runConfigs prints says enough).
func (f *servingFlags) progress(stderr io.Writer) io.Writer {
	if f.quiet || !IsTerminal(stderr) {
		return nil
	}
	return stderr
}

// IsTerminal reports whether w is a terminal: a progress bar redrawn with
// carriage returns goes only there.
func IsTerminal(w io.Writer) bool {
	file, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := file.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// serve runs every configuration on the same requests and reports them.
func (f *servingFlags) serve(m *model.Model, configs []namedConfig, reqs []workload.Request, stdout, stderr io.Writer) error {
	_, err := f.serveRuns(m, configs, reqs, stdout, stderr)
	return err
}

// serveRuns is serve that also returns the runs, for lines printed under
// the report (nil when none ran).
func (f *servingFlags) serveRuns(m *model.Model, configs []namedConfig, reqs []workload.Request, stdout, stderr io.Writer) ([]*metrics.Run, error) {
	newClock, err := workload.ParseClock(f.clock)
	if err != nil {
		return nil, err
	}
	progress := f.progress(stderr)
	runs, err := runConfigs(m, configs, f.name, reqs, newClock, progress, stderr)
	if err != nil {
		return nil, err
	}
	o := f.reportOptions(fmt.Sprintf("%s (%d requests)", f.name, len(reqs)))
	if newClock() != nil {
		o.note = fmt.Sprintf("times: virtual (-clock %s), not measured: every engine step counts as %s", f.clock, strings.TrimPrefix(f.clock, "step:"))
	}
	return runs, report(stdout, runs, o)
}

// wallClockOnly refuses -clock step for a command whose engines run in
// other processes: a virtual clock needs engines this process steps.
func (f *servingFlags) wallClockOnly(what string) error {
	if f.clock != "" && f.clock != "wall" {
		return fmt.Errorf("-clock %s: a virtual clock needs engines run in this process; drop %s or the -clock flag", f.clock, what)
	}
	return nil
}

// reportOptions are the flags' say on what report writes; what names the
// workload for the plots' titles.
func (f *servingFlags) reportOptions(what string) reportOptions {
	return reportOptions{what: what, jsonPath: f.jsonPath, plotPath: f.plotPath, wide: f.wide}
}

package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pkg/profile"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
	"kvlab/kernels/cuda"
)

// runtimeFlags are the flags every command that runs the model shares.
type runtimeFlags struct {
	modelDir   string
	device     string
	cpuProfile string
	memProfile string
	eng        engine.Config
	admission  string
	noCache    bool
}

func (f *runtimeFlags) register(fs *flag.FlagSet, v Variant) {
	f.eng = engine.DefaultConfig()
	fs.StringVar(&f.modelDir, "model", "", "model directory (HF config.json + safetensors); empty: the built-in synthetic model, written on first use")
	device := os.Getenv("KVLAB_DEVICE")
	if device == "" {
		device = "cpu"
	}
	fs.StringVar(&f.device, "device", device, "compute backend: cpu, or cuda in a binary built with -tags cuda (default from KVLAB_DEVICE)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (cpu.pprof) into this directory")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile (mem.pprof) into this directory")
	fs.IntVar(&f.eng.BlockSize, "block-size", f.eng.BlockSize, "tokens per KV block")
	fs.IntVar(&f.eng.NumBlocks, "blocks", f.eng.NumBlocks, "KV pool size in blocks")
	fs.IntVar(&f.eng.MaxBatchTokens, "max-batch-tokens", f.eng.MaxBatchTokens, "per-step token budget (decodes + prefill chunks)")
	fs.IntVar(&f.eng.MaxRunning, "max-running", f.eng.MaxRunning, "most sequences admitted at once")
	fs.IntVar(&f.eng.MaxContext, "max-context", 0, "context limit in tokens; 0: the model's max_position_embeddings")
	fs.BoolVar(&f.eng.ChunkedPrefill, "chunked-prefill", f.eng.ChunkedPrefill, "split prompts into chunks under the step budget (false: whole-prompt prefill)")
	fs.BoolVar(&f.eng.Audit, "audit", false, "check KV block ownership after every step (slow; for debugging)")
	if v.PrefixCache != nil {
		fs.StringVar(&f.admission, "admission", "cost-aware", "how admission charges a prompt: conservative (whole prompt) or cost-aware (prompt − cached prefix)")
		fs.BoolVar(&f.noCache, "no-cache", false, "run without the prefix cache (the phase-7 baseline)")
	}
}

// engineConfig returns the engine settings the flags describe.
func (f *runtimeFlags) engineConfig(v Variant) (engine.Config, error) {
	c := f.eng
	if v.PrefixCache != nil && !f.noCache {
		c.PrefixCache = v.PrefixCache
	}
	switch f.admission {
	case "", "conservative":
		c.Admission = engine.AdmitConservative
	case "cost-aware":
		c.Admission = engine.AdmitCostAware
	default:
		return c, fmt.Errorf("-admission: unknown policy %q (want conservative or cost-aware)", f.admission)
	}
	return c, nil
}

// backend returns the compute backend the -device flag names.
func (f *runtimeFlags) backend() (kernels.Backend, error) {
	switch f.device {
	case "cpu":
		return cpu.New(), nil
	case "cuda":
		be, err := cuda.New()
		if err != nil {
			return nil, fmt.Errorf("-device cuda: %w", err)
		}
		return be, nil
	default:
		return nil, fmt.Errorf("-device: unknown device %q (want cpu or cuda)", f.device)
	}
}

// dir returns the -model directory, or the built-in default model's
// (written on first use).
func (f *runtimeFlags) dir() (string, error) {
	if f.modelDir != "" {
		return f.modelDir, nil
	}
	return DefaultModelDir()
}

// loadModel loads the -model directory, or the built-in default model.
func (f *runtimeFlags) loadModel() (*model.Model, error) {
	be, err := f.backend()
	if err != nil {
		return nil, err
	}
	dir, err := f.dir()
	if err != nil {
		return nil, err
	}
	return model.Load(dir, be)
}

// startProfiles starts the profile the flags ask for and returns the
// function that stops it. pkg/profile runs one profile per process, so the
// two flags exclude each other.
func (f *runtimeFlags) startProfiles() (stop func(), err error) {
	switch {
	case f.cpuProfile != "" && f.memProfile != "":
		return nil, fmt.Errorf("-cpuprofile and -memprofile: pick one per run (one profile per process)")
	case f.cpuProfile != "":
		return profile.Start(profile.CPUProfile, profile.ProfilePath(filepath.Clean(f.cpuProfile)), profile.NoShutdownHook, profile.Quiet).Stop, nil
	case f.memProfile != "":
		return profile.Start(profile.MemProfile, profile.ProfilePath(filepath.Clean(f.memProfile)), profile.NoShutdownHook, profile.Quiet).Stop, nil
	}
	return func() {}, nil
}

// parseTokens parses a comma-separated list of token ids.
func parseTokens(s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("-prompt: empty prompt (want comma-separated token ids, e.g. 1,2,3)")
	}
	var ids []int32
	for i, part := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("-prompt: token %d (%q) is not an integer token id", i, part)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pkg/profile"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
	"kvlab/common/model"
	"kvlab/kernels"
	"kvlab/kernels/cpu"
	"kvlab/kernels/cuda"
)

// runtimeFlags are the flags every command that runs the model shares.
type runtimeFlags struct {
	modelDir   string
	arch       string // -arch: the built-in model's architecture when -model is empty
	device     string
	cpuProfile string
	memProfile string
	eng        engine.Config
	admission  string
	commit     string
	order      string // -order: fcfs or longest-prefix
	noCache    bool
	share      float64     // -tenant-cache-share; 0: no cap
	bf16Dot    bf16DotMode // -bf16-dot: bf16 products (kernels/cpu/bf16dot.go)

	// weights is -mlock and -no-mmap, and the load line serve prints.
	weights weightFlags
	// kvDType is -kv-cache-dtype, -ctk and -ctv (kvdtype.go).
	kvDType kvDTypeFlags
	// trace is -trace and -trace-dump, which only generate and bench register.
	trace traceFlags
	// tiers is -cache-ram, -cache-disk and -cache-disk-size, which serve,
	// bench, generate and logits register (tiers.go).
	tiers tierFlags
	// cacheFlags builds the cache the variant's own flags chose (Variant.CacheFlags).
	cacheFlags func() (CacheBuilder, error)
}

func (f *runtimeFlags) register(fs *flag.FlagSet, v Variant) {
	f.eng = engine.DefaultConfig()
	fs.StringVar(&f.modelDir, "model", "", "model directory (HF config.json + safetensors); empty: the built-in synthetic model, written on first use")
	fs.StringVar(&f.arch, "arch", "llama", "architecture of the built-in model when -model is empty: "+strings.Join(model.BuiltinArchs, ", ")+" (gemma3: 3 sliding-window layers of window 256 to 1 global)")
	device := os.Getenv("KVLAB_DEVICE")
	if device == "" {
		device = "cpu"
	}
	fs.StringVar(&f.device, "device", device, "compute backend: cpu, or cuda in a binary built with -tags cuda (default from KVLAB_DEVICE)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile (cpu.pprof) into this directory")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile (mem.pprof) into this directory")
	f.weights.register(fs)
	fs.Var(&f.bf16Dot, "bf16-dot", "multiply bf16 weights by activations rounded to bf16, with the CPU's bf16 dot product (AVX512-BF16), as llama.cpp does: about twice the prefill speed of a bf16 checkpoint, logits about 1% of their norm from float32 activations' (docs/phase07.md); auto (the default): on where the CPU has the instruction and -device is cpu; -bf16-dot or =true: on, refused without it; =false: float32 activations, the reference; no effect on f32 weights")
	fs.IntVar(&f.eng.BlockSize, "block-size", f.eng.BlockSize, "tokens per KV block")
	fs.IntVar(&f.eng.NumBlocks, "blocks", f.eng.NumBlocks, "KV pool size in blocks")
	f.kvDType.register(fs, &f.eng.KVCacheDType)
	fs.IntVar(&f.eng.MaxBatchTokens, "max-batch-tokens", f.eng.MaxBatchTokens, "per-step token budget (decodes + prefill chunks)")
	fs.IntVar(&f.eng.MaxRunning, "max-running", f.eng.MaxRunning, "most sequences admitted at once")
	fs.IntVar(&f.eng.MaxContext, "max-context", 0, "context limit in tokens; 0: the model's max_position_embeddings")
	fs.BoolVar(&f.eng.ChunkedPrefill, "chunked-prefill", f.eng.ChunkedPrefill, "split prompts into chunks under the step budget (false: whole-prompt prefill)")
	fs.BoolVar(&f.eng.Audit, "audit", false, "check KV block ownership after every step (slow; for debugging)")
	fs.BoolVar(&f.eng.WindowFree, "window-free", false, "give back a sliding-window layer's KV blocks once they fall out of every window still to come (Gemma-3's local layers); not with a prefix cache")
	fs.IntVar(&f.eng.LocalBlocks, "local-blocks", 0, "with -window-free, the local layers' KV storage in blocks; 0: -blocks")
	fs.StringVar(&f.order, "order", "fcfs", "which waiting request admission tries first: fcfs (arrival order) or longest-prefix (the longest cached prefix first)")
	fs.IntVar(&f.eng.MaxWaitSteps, "max-wait-steps", 0, "with -order longest-prefix, a request that has waited this many engine steps goes first (0: no starvation guard)")
	fs.Float64Var(&f.share, "tenant-cache-share", 0, "with a prefix cache, the most of the cached blocks one cache salt keeps when the pool must evict, e.g. 0.5 (0: no cap)")
	if v.PrefixCache != nil {
		fs.StringVar(&f.admission, "admission", "cost-aware", "how admission charges a prompt: conservative (whole prompt) or cost-aware (prompt − cached prefix)")
		fs.BoolVar(&f.noCache, "no-cache", false, "run without the prefix cache (the phase-7 baseline)")
		fs.StringVar(&f.commit, "commit", "chunk", "when computed KV enters the prefix cache: chunk (after every prefill chunk) or prompt-end (only once the whole prompt is computed)")
	}
	f.registerCacheFlags(fs, v)
}

// registerCacheFlags adds the variant's own cache flags, if it has any.
func (f *runtimeFlags) registerCacheFlags(fs *flag.FlagSet, v Variant) {
	if v.PrefixCache != nil && v.CacheFlags != nil {
		f.cacheFlags = v.CacheFlags(fs)
	}
}

// engineConfig returns the engine settings the flags describe.
func (f *runtimeFlags) engineConfig(v Variant) (engine.Config, error) {
	if err := f.kvDType.apply(); err != nil {
		return f.eng, err
	}
	c := f.eng
	f.trace.apply(&c)
	if v.PrefixCache != nil && !f.noCache {
		c.PrefixCache = v.PrefixCache
		if f.cacheFlags != nil {
			build, err := f.cacheFlags()
			if err != nil {
				return c, err
			}
			if build != nil {
				c.PrefixCache = build
			}
		}
	}
	if f.share < 0 || f.share > 1 {
		return c, fmt.Errorf("-tenant-cache-share: %v is not in [0, 1] (0: no cap)", f.share)
	}
	if f.share > 0 {
		if c.PrefixCache == nil {
			return c, fmt.Errorf("-tenant-cache-share: caps a prefix cache's per-salt share, and this run has none (serve needs -prefix-caching)")
		}
		c.PrefixCache = kvcache.ShareCapped(c.PrefixCache, f.share)
	}
	if c.PrefixCache != nil && c.WindowFree {
		return c, fmt.Errorf("-window-free: a prefix cache cannot reuse blocks whose sliding-window layers gave back their out-of-window KV: run without the cache (-no-cache; serve: without -prefix-caching), or drop -window-free (with a cache, every layer keeps every block)")
	}
	if c.PrefixCache != nil && !c.ChunkedPrefill {
		return c, fmt.Errorf("-chunked-prefill=false: a prefix cache requires chunked prefill (whole-prompt prefill attends only to the prompt's own tokens); drop the flag, or run without the cache")
	}
	switch f.commit {
	case "", "chunk":
		c.Commit = engine.CommitEveryChunk
	case "prompt-end":
		c.Commit = engine.CommitPromptEnd
	default:
		return c, fmt.Errorf("-commit: unknown policy %q (want chunk or prompt-end)", f.commit)
	}
	switch f.order {
	case "", "fcfs":
		c.Order = engine.OrderFCFS
	case "longest-prefix":
		c.Order = engine.OrderLongestPrefix
	default:
		return c, fmt.Errorf("-order: unknown order %q (want fcfs or longest-prefix)", f.order)
	}
	switch f.admission {
	case "": // the engine's default
	case "conservative":
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
	dot, err := f.bf16Dot.decide(f.device, cpu.BF16DotNative(), cpu.KernelSet())
	if err != nil {
		return nil, err
	}
	switch f.device {
	case "cpu":
		be := cpu.New()
		be.SetBF16Dot(dot)
		return be, nil
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
	if err := f.checkArch(); err != nil {
		return "", err
	}
	if f.modelDir != "" {
		return f.modelDir, nil
	}
	return model.BuiltinDirFor(f.builtinArch())
}

// builtinArch is the -arch flag, "llama" when unset (a runtimeFlags not
// registered on a flag set).
func (f *runtimeFlags) builtinArch() string {
	if f.arch == "" {
		return "llama"
	}
	return f.arch
}

// checkArch refuses an unknown -arch, and an -arch other than the default
// next to -model: the directory's config.json says its architecture.
func (f *runtimeFlags) checkArch() error {
	if _, err := model.BuiltinFor(f.builtinArch()); err != nil {
		return fmt.Errorf("-arch: %w", err)
	}
	if f.modelDir != "" && f.builtinArch() != "llama" {
		return fmt.Errorf("-arch %s picks the built-in model, -model %s a directory (whose config.json names its architecture): give one", f.arch, f.modelDir)
	}
	return nil
}

// builtinOptions returns the options of the built-in model -arch names.
func (f *runtimeFlags) builtinOptions() (model.SynthOptions, error) {
	if err := f.checkArch(); err != nil {
		return model.SynthOptions{}, err
	}
	return model.BuiltinFor(f.builtinArch())
}

// loadModel loads the -model directory, or the built-in default model,
// after checking the engine flags against the model's config: a setting
// the engine cannot run with, or a KV pool too big for this machine, is
// refused before a weight is read or a byte of the pool allocated.
func (f *runtimeFlags) loadModel() (*model.Model, error) {
	dir, err := f.dir()
	if err != nil {
		return nil, err
	}
	mc, err := model.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := f.preflight(mc); err != nil {
		return nil, err
	}
	be, err := f.backend()
	if err != nil {
		return nil, err
	}
	if dt := f.eng.KVCacheDType; dt != kernels.KVF32 {
		if _, ok := be.(kernels.KVCacher); !ok {
			return nil, fmt.Errorf("-kv-cache-dtype %v: the %s backend keeps its KV pool in float32 only; use -kv-cache-dtype f32 (or -device cpu)", dt, be.Name())
		}
	}
	return f.weights.load(dir, be)
}

// engineFlags names the flag that sets each engine.Config field.
var engineFlags = map[string]string{
	"BlockSize": "-block-size", "NumBlocks": "-blocks", "MaxBatchTokens": "-max-batch-tokens",
	"MaxRunning": "-max-running", "MaxContext": "-max-context", "ChunkedPrefill": "-chunked-prefill",
	"Admission": "-admission", "PrefixCache": "-no-cache", "Commit": "-commit",
	"WindowFree": "-window-free", "LocalBlocks": "-local-blocks",
	"Order": "-order", "MaxWaitSteps": "-max-wait-steps",
	"KVCacheDType": "-kv-cache-dtype",
}

// preflight checks the engine flags against the model's config mc.
func (f *runtimeFlags) preflight(mc *model.Config) error {
	if err := f.kvDType.apply(); err != nil {
		return err
	}
	if err := f.eng.Validate(mc.MaxPositionEmbeddings); err != nil {
		return flagErrors(err)
	}
	need := f.eng.PoolBytes(mc.NumHiddenLayers, mc.KVDim())
	if limit := memoryLimit(); limit > 0 && need > limit {
		hint := "lower -blocks or -block-size"
		if f.eng.KVCacheDType == kernels.KVF32 {
			hint += ", or halve it with -kv-cache-dtype bf16 or f16"
		}
		return fmt.Errorf("-blocks %d × -block-size %d: the KV pool would take %s (%d layers × K and V × %d features × %d bytes (%v) a token), over half of this machine's %s of memory; %s",
			f.eng.NumBlocks, f.eng.BlockSize, byteSize(need), mc.NumHiddenLayers, mc.KVDim(), f.eng.KVCacheDType.Bytes(), f.eng.KVCacheDType, byteSize(2*limit), hint)
	}
	return nil
}

// flagErrors rewrites the engine's config errors on one line, each led by
// the flag that fixes it: "-block-size: block size must be positive, have 0".
func flagErrors(err error) error {
	var lines []string
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		case *engine.ConfigError:
			lines = append(lines, engineFlags[e.Field]+": "+e.Error())
		default:
			if inner := errors.Unwrap(err); inner != nil {
				walk(inner)
			} else {
				lines = append(lines, err.Error())
			}
		}
	}
	walk(err)
	return errors.New(strings.Join(lines, "; "))
}

// byteSize formats n bytes for a reader: 52.4 GB, 310.0 MB.
func byteSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%d bytes", n)
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

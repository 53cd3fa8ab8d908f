// Command benchdecode measures the CPU backend's decode speed on the shape
// of llama2.c's stories15M (hidden 288, intermediate 768, 6 layers, 6
// heads of 48, vocab 4096, tied embeddings, RoPE theta 10000) and, given
// a built llama2.c, compares it with llama2.c's run.c on the same weights.
//
//	go run ./cmd/benchdecode                      # this engine only
//	LLAMA2C_DIR=DIR go run ./cmd/benchdecode      # next to DIR/run
//
// One run is one sequence that starts from token 1 and generates -tokens
// tokens greedily (511 by default: run.c's -n 512 with its BOS). Our rate
// counts from the first output token to the last, so the one-token
// prefill is not in it; run.c's is the "achieved tok/s" it prints, which
// it times the same way (from after its first forward to its last).
//
// The model is written with seeded random weights in float32 and in
// bfloat16 (which the CPU backend keeps as bfloat16). For run.c each is
// exported with package llama2c, widened to float32 (bf16 widens exactly,
// so both engines compute the same function), with a tokenizer.bin that
// makes run.c print token ids. run.c is run as
//
//	OMP_NUM_THREADS=T DIR/run MODEL.bin -t 0 -n N+1 -z tokenizer.bin
//
// once after each of our runs (ours, theirs, ours, ...), so both see the
// same load; a warm-up run of each comes first. Each figure is the median
// of -runs runs, with the best in parentheses. The table also says how
// many of the first generated tokens the two engines agree on: the
// floating-point orders differ, so long greedy runs may part where two
// logits nearly tie. Nothing is downloaded or built: DIR must hold a run
// built by the user, e.g. gcc -Ofast -fopenmp -march=native run.c -lm -o run.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/llama2c"
	"kvlab/internal/benchrun"
	"kvlab/kernels/cpu"
)

func main() {
	runs := flag.Int("runs", 7, "timed runs per figure; the median is printed")
	tokens := flag.Int("tokens", 511, "tokens generated per run, after the one-token prompt")
	threads := flag.Int("threads", 2, "threads: CPU backend workers and GOMAXPROCS here, OMP_NUM_THREADS for run.c")
	dtypes := flag.String("dtypes", "f32,bf16", "comma-separated dtypes of our weights: f32, bf16")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	dir := flag.String("llama2c", os.Getenv("LLAMA2C_DIR"), "a directory holding a built llama2.c run (default $LLAMA2C_DIR; empty: this engine only)")
	keep := flag.String("keep", "", "write the models (and, with -llama2c, their run.c checkpoints and tokenizer.bin) into this directory and keep them; empty: a temporary directory")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "benchdecode: the CPU backend's decode tokens/s on llama2.c's stories15M shape, beside llama2.c's run.c when given\n\nUsage: benchdecode [flags]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	stop, err := benchrun.StartCPUProfile(*profile)
	if err == nil {
		err = run(strings.Split(*dtypes, ","), *runs, *tokens, *threads, *dir, *keep)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchdecode:", err)
		os.Exit(1)
	}
}

// Options returns the benchmark's model in dtype.
func Options(dtype string) model.SynthOptions {
	o := model.DefaultSynth(model.ArchLlama)
	o.Hidden, o.Intermediate, o.Layers, o.Heads, o.KVHeads, o.HeadDim, o.Vocab = 288, 768, 6, 6, 6, 48, 4096
	o.RopeTheta, o.RopeScaling, o.RMSNormEps = 10000, nil, 1e-5
	o.MaxPositions = 2048
	o.DType = dtype
	return o
}

func run(dtypes []string, runs, tokens, threads int, dir, keep string) error {
	if runs < 1 || tokens < 2 || threads < 1 {
		return fmt.Errorf("need -runs ≥ 1, -tokens ≥ 2 and -threads ≥ 1")
	}
	runtime.GOMAXPROCS(threads)
	bin := ""
	if dir != "" {
		bin = filepath.Join(dir, "run")
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
			return fmt.Errorf("no llama2.c run in %s; build it there with gcc -Ofast -fopenmp -march=native run.c -lm -o run", dir)
		}
	}
	tmp := keep
	if tmp == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "benchdecode"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
	}

	if bin == "" {
		fmt.Printf("| weights | decode tok/s, %d tokens, %d threads: median (best) |\n|---|---|\n", tokens, threads)
	} else {
		fmt.Fprintf(os.Stderr, "benchdecode: llama2.c: OMP_NUM_THREADS=%d %s MODEL.bin -t 0 -n %d -z tokenizer.bin, after each of our runs\n", threads, bin, tokens+1)
		fmt.Printf("| weights | decode tok/s, %d tokens, %d threads: ours (best) | llama2.c run.c, f32 (best) | ratio of medians | same first tokens |\n|---|---|---|---|---|\n", tokens, threads)
	}
	be := cpu.NewWithWorkers(threads)
	for _, dtype := range dtypes {
		mdir := filepath.Join(tmp, dtype)
		if err := model.WriteSynthetic(mdir, Options(dtype)); err != nil {
			return err
		}
		var theirs func() (float64, []int32, error)
		if bin != "" {
			ck, tok := filepath.Join(tmp, dtype+".bin"), filepath.Join(tmp, "tokenizer.bin")
			h, err := llama2c.ExportFile(mdir, ck, tokens+1)
			if err != nil {
				return err
			}
			if err := writeTokenizer(tok, h.Vocab); err != nil {
				return err
			}
			theirs = func() (float64, []int32, error) { return runLlama2c(bin, ck, tok, threads, tokens) }
		}
		m, err := model.Load(mdir, be)
		if err != nil {
			return err
		}
		r, err := measure(m, runs, tokens, theirs)
		m.Close()
		if err != nil {
			return err
		}
		if bin == "" {
			fmt.Printf("| %s | %.0f (%.0f) |\n", dtype, benchrun.Median(r.ours), slices.Max(r.ours))
			continue
		}
		fmt.Printf("| %s | %.0f (%.0f) | %.0f (%.0f) | %.2f× | %d of %d |\n", dtype,
			benchrun.Median(r.ours), slices.Max(r.ours), benchrun.Median(r.theirs), slices.Max(r.theirs),
			benchrun.Median(r.ours)/benchrun.Median(r.theirs), r.agree, tokens)
	}
	return nil
}

func writeTokenizer(path string, vocab int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = llama2c.WriteIDTokenizer(f, vocab)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// result holds one rate per run, and the fewest leading tokens the two
// engines agreed on in any run.
type result struct {
	ours, theirs []float64
	agree        int
}

// measure returns m's decode rates in tokens/s, one per run, after one
// warm-up run; when theirs is not nil it is called after each of our runs
// (the warm-up too).
func measure(m *model.Model, runs, tokens int, theirs func() (float64, []int32, error)) (*result, error) {
	cfg := engine.DefaultConfig()
	cfg.NumBlocks = max(cfg.NumBlocks, 2*(tokens+1)/cfg.BlockSize+8)
	e, err := engine.New(m, cfg)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	res := &result{agree: tokens}
	for r := range runs + 1 { // run 0 warms up
		out, first, last, err := benchrun.Run(e, engine.Request{ID: r, Prompt: []int32{1}, MaxTokens: tokens, IgnoreEOS: true})
		if err != nil {
			return nil, err
		}
		if r > 0 {
			res.ours = append(res.ours, float64(len(out)-1)/last.Sub(first).Seconds())
		}
		if theirs == nil {
			continue
		}
		rate, ids, err := theirs()
		if err != nil {
			return nil, err
		}
		if r > 0 {
			res.theirs = append(res.theirs, rate)
		}
		res.agree = min(res.agree, commonPrefix(out, ids))
	}
	return res, nil
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < min(len(a), len(b)) && a[n] == b[n] {
		n++
	}
	return n
}

// runLlama2c runs run.c once, greedily from its BOS token 1, and returns
// the rate it reports and the ids it printed.
func runLlama2c(bin, ck, tok string, threads, tokens int) (float64, []int32, error) {
	cmd := exec.Command(bin, ck, "-t", "0", "-n", strconv.Itoa(tokens+1), "-z", tok)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(threads))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return 0, nil, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return parseRun(stdout.String(), stderr.String())
}

var achieved = regexp.MustCompile(`achieved tok/s: ([0-9.]+)`)

// parseRun reads run.c's output: the generated ids on stdout (with the
// tokenizer of llama2c.WriteIDTokenizer) and "achieved tok/s: R" on
// stderr.
func parseRun(stdout, stderr string) (float64, []int32, error) {
	m := achieved.FindStringSubmatch(stderr)
	if m == nil {
		return 0, nil, fmt.Errorf("llama2.c printed no achieved tok/s:\n%s", stderr)
	}
	rate, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, nil, err
	}
	var ids []int32
	for _, f := range strings.Fields(stdout) {
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return 0, nil, fmt.Errorf("llama2.c printed %q, not a token id", f)
		}
		ids = append(ids, int32(id))
	}
	return rate, ids, nil
}

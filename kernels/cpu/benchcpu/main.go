// Command benchcpu measures the CPU backend end to end: decode and prefill
// tokens per second of the serving engine on two synthetic llama models.
//
//	go run ./kernels/cpu/benchcpu            # models A and B, f32 and bf16, 5 runs each
//	go run ./kernels/cpu/benchcpu -models B -dtypes bf16 -runs 9
//
// Model A is the built-in model (init-model's default: hidden 256, 4
// layers, 4 heads / 2 KV heads of 64, intermediate 768, vocab 4096). Model
// B is hidden 512, 8 layers, 8 heads / 2 KV heads of 64, intermediate 1536,
// vocab 8192. Both have tied embeddings and seeded random weights, written
// to a temporary directory as float32 or bfloat16 and loaded as any
// checkpoint (the CPU backend keeps bf16 weights as bf16).
//
// Decode is one sequence generating -decode tokens greedily after a
// one-token prompt; the time counts from its first output token to its
// last, so the prefill is not in it. Prefill is one -prompt-token prompt
// (seeded random ids) through the engine's default chunked prefill, timed
// from submission to its first output token. Each figure is the median of
// -runs runs in one process, after one warm-up run, with the best run in
// parentheses: on a machine shared with other work the best run is the
// closer to what the code can do, the median to what a user sees.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/kernels/cpu"
)

func main() {
	models := flag.String("models", "A,B", "comma-separated models to run: A, B")
	runs := flag.Int("runs", 5, "timed runs per figure; the median is printed")
	decode := flag.Int("decode", 256, "tokens generated per decode run")
	prompt := flag.Int("prompt", 1000, "prompt tokens per prefill run")
	dtypes := flag.String("dtypes", "f32,bf16", "comma-separated dtypes of the weights on disk: f32, bf16")
	workers := flag.Int("workers", 0, "CPU backend workers (0: GOMAXPROCS)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchcpu:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	for _, env := range []string{"LLAMA_CPP_DIR", "LLAMA2C_DIR"} {
		if os.Getenv(env) != "" {
			fmt.Fprintf(os.Stderr, "benchcpu: %s is set, but running the other engine is not implemented yet (it needs the model exported in its format); only this engine is measured\n", env)
		}
	}
	if err := run(strings.Split(*models, ","), strings.Split(*dtypes, ","), *runs, *decode, *prompt, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "benchcpu:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// synth returns the options of model A or B.
func synth(name, dtype string) (model.SynthOptions, error) {
	o := model.DefaultSynth(model.ArchLlama)
	o.DType = dtype
	switch name {
	case "A":
	case "B":
		o.Hidden, o.Layers, o.Heads, o.KVHeads, o.HeadDim = 512, 8, 8, 2, 64
		o.Intermediate, o.Vocab = 1536, 8192
	default:
		return o, fmt.Errorf("unknown model %q (want A or B)", name)
	}
	return o, nil
}

func run(names, dtypes []string, runs, decode, prompt int, workers int) error {
	if runs < 1 || decode < 2 || prompt < 1 {
		return fmt.Errorf("need -runs ≥ 1, -decode ≥ 2 and -prompt ≥ 1")
	}
	tmp, err := os.MkdirTemp("", "benchcpu")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	be := cpu.New()
	if workers > 0 {
		be = cpu.NewWithWorkers(workers)
	}
	fmt.Printf("| model | weights | decode tok/s, median (best) | prefill tok/s, %d tokens, median (best) |\n|---|---|---|---|\n", prompt)
	for _, name := range names {
		for _, dtype := range dtypes {
			o, err := synth(name, dtype)
			if err != nil {
				return err
			}
			dir := filepath.Join(tmp, name+"-"+dtype)
			if err := model.WriteSynthetic(dir, o); err != nil {
				return err
			}
			m, err := model.Load(dir, be)
			if err != nil {
				return err
			}
			dec, pre, err := measure(m, runs, decode, prompt)
			m.Close()
			if err != nil {
				return err
			}
			fmt.Printf("| %s | %s | %.0f (%.0f) | %.0f (%.0f) |\n", name, dtype,
				median(dec), slices.Max(dec), median(pre), slices.Max(pre))
		}
	}
	return nil
}

// measure returns the decode and prefill rates of m in tokens/s, one per run.
func measure(m *model.Model, runs, decode, prompt int) (dec, pre []float64, err error) {
	cfg := engine.DefaultConfig()
	cfg.NumBlocks = max(cfg.NumBlocks, 2*(prompt+decode)/cfg.BlockSize+8)
	e, err := engine.New(m, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer e.Close()

	rng := rand.New(rand.NewPCG(7, 7))
	ids := make([]int32, prompt)
	for i := range ids {
		ids[i] = int32(3 + rng.IntN(m.Config.VocabSize-3))
	}
	for r := range runs + 1 { // run 0 warms up
		first, last, n, err := timeRequest(e, engine.Request{ID: 2 * r, Prompt: []int32{1}, MaxTokens: decode, IgnoreEOS: true})
		if err != nil {
			return nil, nil, err
		}
		if r > 0 {
			dec = append(dec, float64(n-1)/last.Sub(first).Seconds())
		}
		start := time.Now()
		first, _, _, err = timeRequest(e, engine.Request{ID: 2*r + 1, Prompt: ids, MaxTokens: 1, IgnoreEOS: true})
		if err != nil {
			return nil, nil, err
		}
		if r > 0 {
			pre = append(pre, float64(prompt)/first.Sub(start).Seconds())
		}
	}
	return dec, pre, nil
}

// timeRequest runs r alone to completion and returns when its first and
// last tokens came out and how many tokens it produced.
func timeRequest(e *engine.Engine, r engine.Request) (first, last time.Time, n int, err error) {
	if err := e.Submit(r); err != nil {
		return first, last, 0, err
	}
	for e.Busy() {
		for _, o := range e.Step() {
			if o.Err != nil {
				return first, last, n, o.Err
			}
			now := time.Now()
			if n == 0 {
				first = now
			}
			last = now
			n++
		}
	}
	return first, last, n, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

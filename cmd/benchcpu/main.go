// Command benchcpu measures the CPU backend end to end: decode and prefill
// tokens per second of the serving engine on two synthetic llama models.
//
//	go run ./cmd/benchcpu            # models A and B, f32 and bf16, 5 runs each
//	go run ./cmd/benchcpu -models B -dtypes bf16 -runs 9
//	go run ./cmd/benchcpu -threads 1   # one thread, here and in llama-bench
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
// closer to what the code can do, the median to what a user sees. The line
// above the table names the CPU kernel set that ran (cpu.KernelSet: avx512,
// avx2, neon or go; KVLAB_KERNEL_SET picks one), the threads and the
// platform. -threads sets GOMAXPROCS, the backend's workers and
// llama-bench's -t together, so 1→2 thread scaling is two runs.
//
// With -llama-cpp DIR (default: $LLAMA_CPP_DIR), a llama.cpp build, each
// model is also exported to GGUF (package gguf, as export-gguf does) and
// measured by llama.cpp's llama-bench on the same number of threads:
//
//	llama-bench -m MODEL.gguf -t THREADS -p PROMPT -n 128 -fa 1,0 -r 1 -o json
//
// once per run, interleaved with this engine's runs (ours, theirs, ours,
// theirs, ...) so that both see the same load. The table then adds
// llama.cpp's decode (tg128) and prefill (pp1000) rates with flash
// attention on (median, best) and off (median), and the ratio of our
// median to theirs with flash attention on. Nothing is downloaded or built:
// DIR must hold a built llama-bench (DIR/build/bin, DIR/bin or DIR).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvlab/common/engine"
	"kvlab/common/model"
	"kvlab/common/model/gguf"
	"kvlab/internal/benchrun"
	"kvlab/kernels/cpu"
)

func main() {
	models := flag.String("models", "A,B", "comma-separated models to run: A, B")
	runs := flag.Int("runs", 5, "timed runs per figure; the median is printed")
	decode := flag.Int("decode", 256, "tokens generated per decode run")
	prompt := flag.Int("prompt", 1000, "prompt tokens per prefill run")
	dtypes := flag.String("dtypes", "f32,bf16", "comma-separated dtypes of the weights on disk: f32, bf16")
	threads := flag.Int("threads", 0, "threads: GOMAXPROCS, the CPU backend's workers and llama-bench's -t (0: GOMAXPROCS as it is)")
	workers := flag.Int("workers", 0, "CPU backend workers (0: GOMAXPROCS)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	llamaDir := flag.String("llama-cpp", os.Getenv("LLAMA_CPP_DIR"), "a llama.cpp build to measure on the same models (default $LLAMA_CPP_DIR; empty: this engine only)")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "benchcpu: the CPU engine's decode and prefill tokens/s on synthetic models A and B, beside llama.cpp's when given\n\nUsage: benchcpu [flags]\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := check(strings.Split(*models, ","), strings.Split(*dtypes, ","), *runs, *decode, *prompt); err != nil {
		fmt.Fprintln(os.Stderr, "benchcpu:", err)
		os.Exit(1)
	}
	if *threads < 0 {
		fmt.Fprintln(os.Stderr, "benchcpu: -threads must be ≥ 0, have", *threads)
		os.Exit(1)
	}
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	if os.Getenv("LLAMA2C_DIR") != "" {
		fmt.Fprintln(os.Stderr, "benchcpu: LLAMA2C_DIR is set, but this command compares with llama.cpp (LLAMA_CPP_DIR); make bench-decode (cmd/benchdecode) compares with llama2.c")
	}
	var bench string
	if *llamaDir != "" {
		var err error
		if bench, err = findLlamaBench(*llamaDir); err != nil {
			fmt.Fprintln(os.Stderr, "benchcpu:", err)
			os.Exit(1)
		}
	}
	stop, err := benchrun.StartCPUProfile(*profile)
	if err == nil {
		err = run(strings.Split(*models, ","), strings.Split(*dtypes, ","), *runs, *decode, *prompt, *workers, bench)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcpu:", err)
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

// check refuses flags that cannot run, before any model is written.
func check(names, dtypes []string, runs, decode, prompt int) error {
	switch {
	case runs < 1:
		return fmt.Errorf("-runs must be ≥ 1, have %d", runs)
	case decode < 2:
		return fmt.Errorf("-decode must be ≥ 2, have %d", decode)
	case prompt < 1:
		return fmt.Errorf("-prompt must be ≥ 1, have %d", prompt)
	}
	for _, n := range names {
		if _, err := synth(n, "f32"); err != nil {
			return fmt.Errorf("-models: %w", err)
		}
	}
	for _, d := range dtypes {
		if d != "f32" && d != "bf16" {
			return fmt.Errorf("-dtypes: unknown dtype %q (want f32 or bf16)", d)
		}
	}
	return nil
}

func run(names, dtypes []string, runs, decode, prompt int, workers int, bench string) error {
	if err := check(names, dtypes, runs, decode, prompt); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "benchcpu")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	be := cpu.New()
	threads := runtime.GOMAXPROCS(0)
	if workers > 0 {
		be = cpu.NewWithWorkers(workers)
		threads = workers
	}
	fmt.Print(header(threads))
	if bench == "" {
		fmt.Printf("| model | weights | decode tok/s, median (best) | prefill tok/s, %d tokens, median (best) |\n|---|---|---|---|\n", prompt)
	} else {
		fmt.Fprintf(os.Stderr, "benchcpu: llama.cpp: %s -m MODEL.gguf -t %d -p %d -n %d -fa 1,0 -r 1 -o json, once per run, after each of ours\n",
			bench, threads, prompt, llamaGen)
		fmt.Printf("| model | weights | decode tok/s: ours (best) | llama.cpp tg%d, fa on (best) / off | ratio | prefill tok/s, %d tokens: ours (best) | llama.cpp pp%d, fa on (best) / off | ratio |\n|---|---|---|---|---|---|---|---|\n",
			llamaGen, prompt, prompt)
	}
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
			var theirs func() (llamaRates, error)
			if bench != "" {
				file := dir + ".gguf"
				if _, err := gguf.ExportFile(dir, file); err != nil {
					return err
				}
				theirs = func() (llamaRates, error) { return llamaBench(bench, file, threads, prompt) }
			}
			m, err := model.Load(dir, be)
			if err != nil {
				return err
			}
			r, err := measure(m, runs, decode, prompt, theirs)
			m.Close()
			if err != nil {
				return err
			}
			if bench == "" {
				fmt.Printf("| %s | %s | %.0f (%.0f) | %.0f (%.0f) |\n", name, dtype,
					benchrun.Median(r.dec), slices.Max(r.dec), benchrun.Median(r.pre), slices.Max(r.pre))
				continue
			}
			fmt.Printf("| %s | %s | %.0f (%.0f) | %.0f (%.0f) / %.0f | %.2f× | %.0f (%.0f) | %.0f (%.0f) / %.0f | %.2f× |\n", name, dtype,
				benchrun.Median(r.dec), slices.Max(r.dec), benchrun.Median(r.tgFA), slices.Max(r.tgFA), benchrun.Median(r.tg), benchrun.Median(r.dec)/benchrun.Median(r.tgFA),
				benchrun.Median(r.pre), slices.Max(r.pre), benchrun.Median(r.ppFA), slices.Max(r.ppFA), benchrun.Median(r.pp), benchrun.Median(r.pre)/benchrun.Median(r.ppFA))
		}
	}
	return nil
}

// header is the line above the table: the CPU kernel set the backend runs
// (cpu.KernelSet: avx512, avx2, neon or go), the threads and the platform,
// then a blank line.
func header(threads int) string {
	return fmt.Sprintf("kernels %s, %d threads, %s/%s\n\n", cpu.KernelSet(), threads, runtime.GOOS, runtime.GOARCH)
}

// rates holds one figure per run: this engine's decode and prefill rates
// and, when measured, llama.cpp's with flash attention on and off.
type rates struct {
	dec, pre           []float64
	tgFA, tg, ppFA, pp []float64
}

// measure returns the decode and prefill rates of m in tokens/s, one per
// run, after one warm-up run. When theirs is not nil it is called after
// each of our runs (the warm-up too), so the two engines alternate.
func measure(m *model.Model, runs, decode, prompt int, theirs func() (llamaRates, error)) (*rates, error) {
	cfg := engine.DefaultConfig()
	cfg.NumBlocks = max(cfg.NumBlocks, 2*(prompt+decode)/cfg.BlockSize+8)
	e, err := engine.New(m, cfg)
	if err != nil {
		return nil, err
	}
	defer e.Close()

	rng := rand.New(rand.NewPCG(7, 7))
	ids := make([]int32, prompt)
	for i := range ids {
		ids[i] = int32(3 + rng.IntN(m.Config.VocabSize-3))
	}
	res := &rates{}
	for r := range runs + 1 { // run 0 warms up
		out, first, last, err := benchrun.Run(e, engine.Request{ID: 2 * r, Prompt: []int32{1}, MaxTokens: decode, IgnoreEOS: true})
		if err != nil {
			return nil, err
		}
		if r > 0 {
			res.dec = append(res.dec, float64(len(out)-1)/last.Sub(first).Seconds())
		}
		start := time.Now()
		_, first, _, err = benchrun.Run(e, engine.Request{ID: 2*r + 1, Prompt: ids, MaxTokens: 1, IgnoreEOS: true})
		if err != nil {
			return nil, err
		}
		if r > 0 {
			res.pre = append(res.pre, float64(prompt)/first.Sub(start).Seconds())
		}
		if theirs == nil {
			continue
		}
		lr, err := theirs()
		if err != nil {
			return nil, err
		}
		if r > 0 {
			res.tgFA, res.tg = append(res.tgFA, lr.tgFA), append(res.tg, lr.tg)
			res.ppFA, res.pp = append(res.ppFA, lr.ppFA), append(res.pp, lr.pp)
		}
	}
	return res, nil
}

// llamaGen is the number of tokens llama-bench's decode test generates.
const llamaGen = 128

// llamaRates is one llama-bench run: decode (tg) and prefill (pp) tokens/s
// with flash attention on (FA) and off.
type llamaRates struct{ tgFA, tg, ppFA, pp float64 }

// findLlamaBench returns the llama-bench binary of the llama.cpp build in
// dir.
func findLlamaBench(dir string) (string, error) {
	for _, sub := range []string{"build/bin", "bin", "."} {
		p := filepath.Join(dir, sub, "llama-bench")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no llama-bench under %s (looked in build/bin, bin and the directory itself); build it with cmake --build build --target llama-bench", dir)
}

// llamaBench runs llama-bench once on file and returns its four rates.
func llamaBench(bench, file string, threads, prompt int) (llamaRates, error) {
	cmd := exec.Command(bench, "-m", file, "-t", strconv.Itoa(threads), "-p", strconv.Itoa(prompt),
		"-n", strconv.Itoa(llamaGen), "-fa", "1,0", "-r", "1", "-o", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return llamaRates{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, lastLines(stderr.String(), 10))
	}
	return parseLlamaBench(out)
}

// parseLlamaBench reads llama-bench's JSON output: one object per test
// with n_prompt, n_gen, flash_attn and avg_ts (tokens/s).
func parseLlamaBench(out []byte) (llamaRates, error) {
	var tests []struct {
		NPrompt   int     `json:"n_prompt"`
		NGen      int     `json:"n_gen"`
		FlashAttn any     `json:"flash_attn"`
		AvgTS     float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(out, &tests); err != nil {
		return llamaRates{}, fmt.Errorf("llama-bench output: %w", err)
	}
	var r llamaRates
	var seen int
	for _, t := range tests {
		fa := false
		switch v := t.FlashAttn.(type) {
		case bool:
			fa = v
		case float64:
			fa = v != 0
		case string:
			fa = v == "on" || v == "enabled" || v == "1" || v == "true"
		}
		var dst *float64
		switch {
		case t.NGen > 0 && fa:
			dst = &r.tgFA
		case t.NGen > 0:
			dst = &r.tg
		case t.NPrompt > 0 && fa:
			dst = &r.ppFA
		case t.NPrompt > 0:
			dst = &r.pp
		default:
			continue
		}
		*dst = t.AvgTS
		seen++
	}
	if seen != 4 {
		return r, errors.New("llama-bench output: want four tests (pp and tg, flash attention on and off)")
	}
	return r, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

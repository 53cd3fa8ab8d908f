// Package cli is the command line every phase's runnable shares:
//
//	init-model  write a seeded synthetic model in HuggingFace layout
//	logits      print the last position's logits for a prompt as JSON
//	generate    generate tokens for a prompt and print them as JSON
//	bench       run a serving workload and print a metrics table
//	serve       serve the engine over HTTP: OpenAI and llama-server APIs
//	trace-example  trace a small scripted run through the variant's prefix cache
//
// generate and bench take -trace: one line per engine step and cache event
// on stderr (common/trace).
//
// A phase's main package passes a Variant saying which prefix cache (if
// any) its engine uses; everything else is the same in every phase, so the
// phases differ only where the lesson does.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"kvlab/common/kvcache"
)

// Variant describes one runnable: its name and the prefix cache it plugs
// into the engine.
type Variant struct {
	// Name labels the runnable in usage text and tables.
	Name string
	// Summary is one line for the usage text.
	Summary string
	// PrefixCache builds the variant's prefix cache; nil for the baseline.
	PrefixCache func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache
	// CacheFlags, if set, registers the variant's own cache flags on the
	// flag set of every command that runs the cache, and returns what
	// builds the cache those flags chose. The builder runs after parsing;
	// it returns nil for PrefixCache itself, or an error naming the flag.
	CacheFlags func(fs *flag.FlagSet) func() (CacheBuilder, error)
}

// CacheBuilder builds a prefix cache over an allocator, as
// engine.Config.PrefixCache does.
type CacheBuilder = func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache

// command is one subcommand.
type command struct {
	summary string
	run     func(v Variant, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"init-model":     {"write a seeded synthetic model (HF config.json + model.safetensors)", runInitModel},
	"logits":         {"print the last prompt position's logits as JSON", runLogits},
	"generate":       {"generate tokens for a prompt and print them as JSON", runGenerate},
	"bench":          {"run a serving workload and print TTFT/ITL/throughput", runBench},
	"chunking":       {"whole-prompt against chunked prefill at several step budgets: TTFT of long and short prompts, ITL", runChunking},
	"serve":          {"serve the engine over HTTP (OpenAI and llama-server APIs, Prometheus metrics)", runServe},
	"export-gguf":    {"write a model as a GGUF file for llama.cpp and ollama", runExportGGUF},
	"trace-example":  {"trace the worked example of docs/phase08_trace.md through this runnable's prefix cache", runTraceExample},
	"export-llama2c": {"write a Llama as a checkpoint for llama2.c's run.c", runExportLlama2c},
}

// errUsage marks an error already explained by a usage message.
var errUsage = errors.New("usage")

// Main runs the subcommand named by args[0] and returns the process exit
// code: 0 on success, 2 for bad usage, 1 for any other failure.
func Main(v Variant, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(v, stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", v.Name, args[0])
		usage(v, stderr)
		return 2
	}
	return exitCode(c.run(v, args[1:], stdout, stderr), stderr, v.Name+" "+args[0])
}

// exitCode turns a command's error into the process exit code: 0 on
// success or -h, 2 for bad usage (already explained), 1 for anything else,
// which it reports on stderr after prefix.
func exitCode(err error, stderr io.Writer, prefix string) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 1
	}
}

func usage(v Variant, w io.Writer) {
	fmt.Fprintf(w, "%s: %s\n\nUsage: %s <command> [flags]\n\nCommands:\n", v.Name, v.Summary, v.Name)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", v.Name)
}

// newFlagSet returns a flag set that reports errors to stderr and never
// exits the process.
func newFlagSet(v Variant, name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(v.Name+" "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args and turns a flag error into errUsage (the flag package
// already printed it).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return errUsage
	}
	return nil
}

// Package docnumbers regenerates the deterministic numbers the docs quote.
//
// A generated block in a Markdown file sits between two marker comments:
//
//	<!-- numbers:NAME -->
//	```
//	$ go run ./phase08 -clock step:50ms
//	…the command's output…
//	```
//	<!-- /numbers -->
//
// Blocks lists every NAME with its command. Every command runs with a
// virtual clock (-clock step:…), so its output — token counts, hit rates,
// preemptions and the virtual times alike — is the same on every machine
// and every run; Generate runs it and Update writes the output between the
// markers. `make docs-numbers` regenerates them all, and docs/numbers_test.go
// checks the Short ones (small enough to run in seconds) against what is
// committed.
package docnumbers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Block is one generated block: its marker name, the Markdown file (from
// the repository root) that holds it, and the command that produces it.
type Block struct {
	Name string
	Doc  string
	// Runnable is the main package's folder, e.g. phase08.
	Runnable string
	Args     []string
	// Short blocks run in seconds and are checked by the docs test.
	Short bool
}

// Command is the command line the doc shows.
func (b Block) Command() string {
	shown := make([]string, len(b.Args))
	for i, a := range b.Args {
		shown[i] = a
		if a == "" {
			shown[i] = `""`
		}
	}
	return "go run ./" + b.Runnable + " " + strings.Join(shown, " ")
}

// Clock is the virtual clock every block runs with: each engine step counts
// as 50 ms, about a prefill step of the built-in model on a small CPU, so
// the baseline falls behind 8 arrivals a second as it does on real hardware.
const Clock = "step:50ms"

// small is the test's scale of the prefix_caching workload.
var small = []string{"-requests", "8", "-prefix-len", "128", "-suffix-max", "32", "-min-tokens", "4", "-max-tokens", "16"}

func args(a ...[]string) []string {
	var out []string
	for _, x := range a {
		out = append(out, x...)
	}
	return out
}

var clock = []string{"-clock", Clock}

// Blocks is every generated block, in the order make docs-numbers runs them.
var Blocks = []Block{
	{Name: "phase08-small", Doc: "docs/phase08.md", Runnable: "phase08", Args: args(clock, small, []string{"-plot", "", "-quiet"}), Short: true},
	{Name: "prefix-admission-small-conservative", Doc: "docs/phase08_prefix.md", Runnable: "phase08_prefix", Args: args([]string{"bench", "-quiet", "-blocks", "16", "-admission", "conservative", "-wide"}, clock, small, []string{"-rps", "16"}), Short: true},
	{Name: "prefix-admission-small-cost-aware", Doc: "docs/phase08_prefix.md", Runnable: "phase08_prefix", Args: args([]string{"bench", "-quiet", "-blocks", "16", "-admission", "cost-aware", "-wide"}, clock, small, []string{"-rps", "16"}), Short: true},
	{Name: "phase08-prefix_caching", Doc: "docs/phase08.md", Runnable: "phase08", Args: args(clock, []string{"-plot", "", "-quiet"})},
	{Name: "phase08-multi_turn", Doc: "docs/phase08.md", Runnable: "phase08", Args: args([]string{"-workload", "multi_turn"}, clock, []string{"-plot", "", "-quiet"})},
	{Name: "phase08-no_shared_prefix", Doc: "docs/phase08.md", Runnable: "phase08", Args: args([]string{"-workload", "no_shared_prefix"}, clock, []string{"-plot", "", "-quiet"})},
	{Name: "prefix-compare", Doc: "docs/phase08_prefix.md", Runnable: "phase08_prefix", Args: args([]string{"bench", "-compare", "-quiet"}, clock)},
	{Name: "prefix-prompt-end", Doc: "docs/phase08_prefix.md", Runnable: "phase08_prefix", Args: args([]string{"bench", "-commit", "prompt-end", "-quiet"}, clock)},
	{Name: "prefix-admission-conservative", Doc: "docs/phase08_prefix.md", Runnable: "phase08_prefix", Args: args([]string{"bench", "-quiet", "-blocks", "256", "-admission", "conservative", "-wide"}, clock)},
	{Name: "prefix-admission-cost-aware", Doc: "docs/phase08_prefix.md", Runnable: "phase08_prefix", Args: args([]string{"bench", "-quiet", "-blocks", "256", "-admission", "cost-aware", "-wide"}, clock)},
	{Name: "phase07-bench", Doc: "docs/phase07.md", Runnable: "phase07_chunked", Args: args([]string{"bench", "-quiet"}, clock)},
	// The worked example traced through each design (it counts steps, not time), and the commit moment on the full workload.
	{Name: "trace-prefix", Doc: "docs/phase08_trace.md", Runnable: "phase08_prefix", Args: []string{"trace-example"}, Short: true},
	{Name: "trace-hashcow", Doc: "docs/phase08_trace.md", Runnable: "phase08_hashcow", Args: []string{"trace-example"}, Short: true},
	{Name: "trace-compressed", Doc: "docs/phase08_trace.md", Runnable: "phase08_compressed", Args: []string{"trace-example"}, Short: true},
	{Name: "trace-prompt-end", Doc: "docs/phase08_trace.md", Runnable: "phase08_prefix", Args: []string{"trace-example", "-commit", "prompt-end"}, Short: true},
	{Name: "trace-workload-chunk", Doc: "docs/phase08_trace.md", Runnable: "phase08_prefix", Args: []string{"bench", "-quiet", "-clock", "step:100ms"}},
	{Name: "trace-workload-prompt-end", Doc: "docs/phase08_trace.md", Runnable: "phase08_prefix", Args: []string{"bench", "-commit", "prompt-end", "-quiet", "-clock", "step:100ms"}},
	{Name: "experiment-align", Doc: "docs/phase08_experiments.md", Runnable: "phase08", Args: args([]string{"align"}, clock, []string{"-plot", "", "-quiet"})},
	{Name: "experiment-pressure", Doc: "docs/phase08_experiments.md", Runnable: "phase08", Args: args([]string{"pressure"}, clock, []string{"-plot", "", "-quiet"})},
	{Name: "experiment-order", Doc: "docs/phase08_experiments.md", Runnable: "phase08", Args: args([]string{"order"}, clock, []string{"-plot", "", "-quiet"}), Short: true},
	// The pool too small for six system prompts that docs/debug_cache.md walks through: misses by reason, the bound, the ghosts.
	{Name: "debug-pressure", Doc: "docs/debug_cache.md", Runnable: "phase08", Args: args([]string{"-workload", "system_prompts", "-requests", "36", "-prefix-len", "32", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-blocks", "40", "-block-size", "4"}, clock, []string{"-plot", "", "-quiet"}), Short: true},
	{Name: "gpu-step-bound", Doc: "docs/gpu.md", Runnable: "phase08", Args: args(clock, []string{"-requests", "8", "-rps", "0.5", "-plot", "", "-quiet"})},
}

// Build compiles the runnables the blocks use into dir and returns a
// function that runs a block with them.
func Build(root, dir string, blocks []Block) (func(Block) (string, error), error) {
	seen := map[string]bool{}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator))
	for _, b := range blocks {
		if !seen[b.Runnable] {
			seen[b.Runnable] = true
			cmd.Args = append(cmd.Args, "./"+b.Runnable)
		}
	}
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	return func(b Block) (string, error) {
		var stdout, stderr bytes.Buffer
		c := exec.Command(filepath.Join(dir, b.Runnable), b.Args...)
		c.Dir = dir // anything the command writes lands beside the binaries
		c.Stdout, c.Stderr = &stdout, &stderr
		if err := c.Run(); err != nil {
			return "", fmt.Errorf("%s: %v\n%s%s", b.Command(), err, stdout.String(), stderr.String())
		}
		return "```\n$ " + b.Command() + "\n" + stdout.String() + "```\n", nil
	}, nil
}

// marker matches one generated block; group 1 is its name, group 2 the
// content between the markers.
var marker = regexp.MustCompile(`(?s)<!-- numbers:([A-Za-z0-9_.-]+) -->\n(.*?)<!-- /numbers -->`)

// Extract returns the content of block name in doc.
func Extract(doc []byte, name string) (string, bool) {
	for _, m := range marker.FindAllSubmatch(doc, -1) {
		if string(m[1]) == name {
			return string(m[2]), true
		}
	}
	return "", false
}

// Names returns the names of every block in doc, in order.
func Names(doc []byte) []string {
	var names []string
	for _, m := range marker.FindAllSubmatch(doc, -1) {
		names = append(names, string(m[1]))
	}
	return names
}

// Update replaces block name's content in the file at path.
func Update(path, name, content string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	found := false
	out := marker.ReplaceAllFunc(doc, func(m []byte) []byte {
		sub := marker.FindSubmatch(m)
		if string(sub[1]) != name {
			return m
		}
		found = true
		return []byte("<!-- numbers:" + name + " -->\n" + content + "<!-- /numbers -->")
	})
	if !found {
		return fmt.Errorf("%s: no <!-- numbers:%s --> block", path, name)
	}
	return os.WriteFile(path, out, 0o644)
}

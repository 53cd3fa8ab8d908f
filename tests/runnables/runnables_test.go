// Package runnables checks every program of the repository from the outside,
// as a user meets it: each is built, then run as a process with -h, with a
// flag it does not have and with bad values, and what comes back on the
// process's exit code and output streams is checked — not a function's
// return value.
package runnables

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// standIns are main packages that take another program's command line, not
// one of their own, so -h and an unknown flag mean what they mean to that
// program: they are left out of TestRunnablesFromTheOutside.
var standIns = map[string]string{
	"tests/llama-suite/shim": "stands in for llama-server under llama.cpp's tests: it maps llama-server's flags to serve's and logs the ones it cannot map",
}

// mainPackages lists every main package of the module outside internal/
// and standIns, as the folder it lives in (e.g. phase08_prefix, cmd/benchcpu).
func mainPackages(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.Dir}}{{end}}`, "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	require.NoError(t, err)
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root(t), dir)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, "internal/") && standIns[rel] == "" {
			pkgs = append(pkgs, rel)
		}
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

func root(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return abs
}

// build compiles every runnable into one temporary folder and returns it.
func build(t *testing.T, pkgs []string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range pkgs {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir
}

// result is what a finished process left.
type result struct {
	code           int
	stdout, stderr string
}

// run starts bin with args in a scratch folder and waits for it, at most a
// minute: every case here must end long before any work would.
func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s %v did not end within a minute", filepath.Base(bin), args)
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, o.String(), e.String()}
}

// subcommands reads the command names from a usage text's "Commands:"
// section; nil when the program has none.
func subcommands(usage string) []string {
	var cmds []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(usage))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "Commands:":
			in = true
		case in && strings.TrimSpace(line) == "":
			return cmds
		case in:
			cmds = append(cmds, strings.Fields(line)[0])
		}
	}
	return cmds
}

// TestRunnablesFromTheOutside builds every runnable and checks, on each, the
// things a newcomer hits first: -h on the program and on each of its
// commands answers with that program's (and command's) own name and exits
// 0; an unknown flag and bad values are refused with a non-zero exit and
// one line of error that names the flag, never a Go stack trace, before any
// work — no replica started, no model loaded, nothing written to stdout.
func TestRunnablesFromTheOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every runnable")
	}
	pkgs := mainPackages(t)
	bins := build(t, pkgs)
	for _, pkg := range pkgs {
		name := filepath.Base(pkg)
		bin := filepath.Join(bins, name)
		t.Run(name+"/help", func(t *testing.T) {
			r := run(t, bin, "-h")
			assert.Equal(t, 0, r.code, "stderr: %s", r.stderr)
			help := r.stdout + r.stderr
			assert.True(t, strings.HasPrefix(help, name+":") || strings.HasPrefix(help, "Usage of "+name+":"),
				"-h should open with the program's own name; have %q", firstLine(help))
			for _, sub := range subcommands(help) {
				r := run(t, bin, sub, "-h")
				assert.Equal(t, 0, r.code, "%s %s -h: %s", name, sub, r.stderr)
				assert.Contains(t, firstLine(r.stdout+r.stderr), name+" "+sub, "%s -h names another command", sub)
			}
		})
		t.Run(name+"/unknown-flag", func(t *testing.T) {
			args := []string{"-no-such-flag"}
			r := run(t, bin, "-h")
			if subs := subcommands(r.stdout + r.stderr); subs != nil {
				args = append([]string{subs[0]}, args...)
			}
			r = run(t, bin, args...)
			assert.NotEqual(t, 0, r.code)
			assert.Contains(t, r.stderr, "no-such-flag")
			assert.NotContains(t, r.stderr, "goroutine ")
		})
	}
	// Bad values, per program: each must be refused on one line that names
	// the flag, before any work.
	bad := map[string][][]string{
		"phase07_chunked": {
			{"bench", "-block-size", "0"},
			{"bench", "-requests", "0"},
			{"generate", "-prompt", "1,2", "-top-p", "0"},
			{"generate", "-prompt", "1,2", "-n", "0"},
			{"serve", "-port", "0", "-max-context", "-1"},
		},
		"phase08_prefix": {{"bench", "-blocks", "-3"}, {"serve", "-port", "0", "-block-size", "0"}},
		"phase08_hashcow": {
			{"bench", "-max-running", "0"},
			{"generate", "-prompt", "1,2", "-max-tokens", "-1"},
			{"serve", "-port", "0", "-prefix-caching", "-block-hash", "nope"},
		},
		"phase08_compressed": {{"bench", "-rps", "-1"}, {"generate", "-prompt", "1,2", "-temperature", "-0.5"}},
		"phase08":            {{"-block-size", "0"}, {"-admission", "greedy"}, {"-vocab", "999999"}},
		"phase08_router": {
			{"bench", "-replicas", "0"},
			{"bench", "-policies", "round-robin,nope"},
			{"serve", "-port", "-5"},
			{"serve", "-cache-threshold", "2"},
			{"serve", "-design", "nope"},
		},
		"phase08_leak": {{"-secret", "-1"}, {"-trials", "0"}},
		"benchcpu":     {{"-runs", "0"}, {"-models", "Z"}},
	}
	for name, cases := range bad {
		bin := filepath.Join(bins, name)
		for _, args := range cases {
			t.Run(name+"/"+strings.Join(args, " "), func(t *testing.T) {
				r := run(t, bin, args...)
				flagName := args[len(args)-2]
				assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)
				assert.Empty(t, r.stdout, "nothing may be printed before the refusal")
				assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line of error; have %q", r.stderr)
				assert.Contains(t, r.stderr, flagName)
				assert.True(t, strings.HasPrefix(r.stderr, name), "the error names the program; have %q", r.stderr)
				assert.NotContains(t, r.stderr, "goroutine ")
			})
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestMakeHelpFitsTheTerminal runs `make help` and requires every line to
// fit 120 columns, the width of a learner's terminal beside an editor.
func TestMakeHelpFitsTheTerminal(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "-s", "help")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	require.Greater(t, len(lines), 10, "make help lists the targets")
	for _, line := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), 120, "have %q", line)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kvlab/common/cli"
	"kvlab/phase08_prefix/radix"
)

// fixedHelp is `serve -h` as Go's flag package prints it, cut to the
// flags the mapping cases below need, so they do not move with serve.
const fixedHelp = `Usage of phase08_prefix serve:
  -host string
    	address to listen on (default "127.0.0.1")
  -max-context int
    	context limit in tokens
  -metrics
    	serve GET /metrics
  -parallel int
    	llama-server's slots (-np)
  -port int
    	port to listen on (default 8000)
  -served-model-name string
    	model id in /v1/models
  -slots
    	serve GET /slots (default true)
  -timeout duration
    	answer 408 ... (default 10m0s)
`

// tinyllama2 is the command line llama.cpp's server tests start their
// default preset with (utils.py's ServerProcess.start).
var tinyllama2 = strings.Fields("--host 127.0.0.1 --port 8080 --temp 0.8 --seed 42 --offline " +
	"--hf-repo ggml-org/test-model-stories260K --batch-size 32 --no-slots --alias tinyllama-2 " +
	"--ctx-size 512 --parallel 2 --n-predict 64 --no-jinja")

func TestToServeMapsTheSuitesFlags(t *testing.T) {
	args := append(append([]string{}, tinyllama2...), "--metrics", "-to", "5", "-fa", "on", "--slot-save-path", "./tmp")
	argv, unmapped := toServe(args, parseHelp(fixedHelp))
	want := []string{"serve", "-prefix-caching", "-host", "127.0.0.1", "-port", "8080",
		"-slots=false", "-served-model-name", "tinyllama-2", "-max-context", "256", "-parallel", "2",
		"-metrics", "-timeout", "5s"}
	if !reflect.DeepEqual(argv, want) {
		t.Errorf("serve's command line:\n got %q\nwant %q", argv, want)
	}
	// The model flags (--offline, --hf-repo) are not logged: serve runs its
	// built-in model by design. Everything else serve lacks is.
	wantUnmapped := []string{"--temp 0.8", "--seed 42", "--batch-size 32", "--n-predict 64",
		"--no-jinja", "-fa on", "--slot-save-path ./tmp"}
	if !reflect.DeepEqual(unmapped, wantUnmapped) {
		t.Errorf("unmapped:\n got %q\nwant %q", unmapped, wantUnmapped)
	}
}

func TestToServePrefersServesOwnName(t *testing.T) {
	help := fixedHelp + "  -alias string\n    \tmodel names\n  -ctx-size int\n    \tllama-server's -c\n"
	argv, _ := toServe([]string{"-a", "m1,m2", "-c", "256"}, parseHelp(help))
	want := []string{"serve", "-prefix-caching", "-alias", "m1,m2", "-ctx-size", "256", "-metrics=false"}
	if !reflect.DeepEqual(argv, want) {
		t.Errorf("got %q, want %q", argv, want)
	}
}

// TestToServePassesCacheRAM: llama-server's --cache-ram and its short
// -cram reach serve's -cache-ram, the host-memory tier under the prefix
// cache that every serve the shim starts has.
func TestToServePassesCacheRAM(t *testing.T) {
	help := parseHelp(fixedHelp + "  -cache-ram int\n    \tllama-server's host-memory cache, in MiB\n")
	for _, args := range [][]string{{"--cache-ram", "100"}, {"-cram", "100"}, {"--cache-ram=100"}} {
		argv, unmapped := toServe(args, help)
		want := []string{"serve", "-prefix-caching", "-cache-ram", "100", "-metrics=false"}
		if !reflect.DeepEqual(argv, want) || len(unmapped) > 0 {
			t.Errorf("%q: got %q (unmapped %q), want %q", args, argv, unmapped, want)
		}
	}
}

// TestToServeGivesEachSlotItsShare: llama-server splits --ctx-size across an
// explicit --parallel unless --kv-unified, and serves /metrics only with
// --metrics; serve's -max-context is per request and its /metrics is on.
func TestToServeGivesEachSlotItsShare(t *testing.T) {
	help := parseHelp(fixedHelp)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{strings.Fields("-c 512 -np 2"), strings.Fields("-max-context 256 -parallel 2 -metrics=false")},
		{strings.Fields("-c 512 -np 2 --kv-unified --metrics"), strings.Fields("-max-context 512 -parallel 2 -metrics")},
		{strings.Fields("-c 512 --metrics"), strings.Fields("-max-context 512 -metrics")},
	} {
		argv, _ := toServe(c.args, help)
		if want := append([]string{"serve", "-prefix-caching"}, c.want...); !reflect.DeepEqual(argv, want) {
			t.Errorf("%q: got %q, want %q", c.args, argv, want)
		}
	}
}

func TestToControlReplacesTheModelFlags(t *testing.T) {
	got := toControl(append(tinyllama2, "-m", "x.gguf", "--no-mmproj"), "/m/builtin.gguf")
	want := strings.Fields("--host 127.0.0.1 --port 8080 --temp 0.8 --seed 42 --batch-size 32 " +
		"--no-slots --alias tinyllama-2 --ctx-size 512 --parallel 2 --n-predict 64 --no-jinja -m /m/builtin.gguf")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("llama-server's command line:\n got %q\nwant %q", got, want)
	}
}

// serveHelp is the real `phase08_prefix serve -h`.
func serveHelp(t *testing.T) string {
	var buf bytes.Buffer
	err := cli.Serve(context.Background(), variant, []string{"-h"}, nil, &buf)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve -h: %v", err)
	}
	return buf.String()
}

var variant = cli.Variant{Name: "phase08_prefix", PrefixCache: radix.New}

// TestServeStartsOnTheSuitesCommandLines translates the command lines of
// the suite's presets against the real serve's flags, and starts serve on
// each: a mapped flag serve refuses (a value out of its range, a flag
// pair it rejects) would make every test of the suite fail at start-up.
func TestServeStartsOnTheSuitesCommandLines(t *testing.T) {
	flags := parseHelp(serveHelp(t))
	for _, f := range []string{"host", "port", "parallel", "prefix-caching", "slot-save-path", "timeout"} {
		if _, ok := flags[f]; !ok {
			t.Fatalf("serve -h lists no -%s; the shim maps llama-server's to it", f)
		}
	}
	dir := t.TempDir()
	for name, line := range map[string]string{
		"tinyllama2": strings.Join(tinyllama2, " "),
		"router":     "--host 127.0.0.1 --port 8080 --temp 0.8 --seed 42 --batch-size 16 --no-slots --ctx-size 1024 --parallel 1 --n-predict 16 --no-jinja",
		"slot_save":  "--host 127.0.0.1 --port 8080 --temp 0.0 --seed 42 --batch-size 32 --slots --alias tinyllama-2 --ctx-size 512 --parallel 2 --n-predict 64 --slot-save-path " + dir + " --swa-full --no-jinja",
		"metrics":    "--host 127.0.0.1 --port 8080 --metrics --slots --ctx-size 512 --parallel 1 --api-key k --timeout 5 --jinja --chat-template llama3",
		"cache_ram":  "--host 127.0.0.1 --port 8080 --ctx-size 512 --parallel 2 --cache-ram 100 --kv-unified",
	} {
		t.Run(name, func(t *testing.T) {
			argv, unmapped := toServe(strings.Fields(line), flags)
			t.Logf("serve %q; unmapped %q", argv[1:], unmapped)
			for i, a := range argv {
				if a == "-port" {
					argv[i+1] = "0"
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var log bytes.Buffer
			var started atomic.Bool
			err := cli.Serve(ctx, variant, argv[1:], func(string) { started.Store(true); cancel() }, &log)
			if !started.Load() {
				t.Fatalf("serve did not start: %v\n%s", err, log.String())
			}
		})
	}
}

// TestDryRunLogsTheUnmappedFlags runs the shim as the suite does, against
// a stand-in serve whose -h prints fixedHelp: the command it would exec,
// and each flag serve lacks appended to KVLAB_SHIM_LOG with the test that
// started the server.
func TestDryRunLogsTheUnmappedFlags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "serve")
	script := "#!/bin/sh\ncat <<'EOF'\n" + fixedHelp + "EOF\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "unmapped.log")
	t.Setenv("KVLAB_SHIM_BIN", bin)
	t.Setenv("KVLAB_SHIM_TARGET", "")
	t.Setenv("KVLAB_SHIM_LOG", logPath)
	t.Setenv("KVLAB_SHIM_DRY_RUN", "1")
	t.Setenv("PYTEST_CURRENT_TEST", "unit/test_basic.py::test_server_start_simple (setup)")
	var out bytes.Buffer
	if err := run([]string{"--port", "8080", "--temp", "0.8", "--hf-repo", "x/y", "--metrics"}, &out); err != nil {
		t.Fatal(err)
	}
	want := bin + "\nserve\n-prefix-caching\n-port\n8080\n-metrics\nunmapped: --temp 0.8\n"
	if out.String() != want {
		t.Errorf("dry run printed\n%s\nwant\n%s", out.String(), want)
	}
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSpace(string(logged)), "\t")
	if len(fields) != 3 || fields[1] != "--temp 0.8" || fields[2] != "unit/test_basic.py::test_server_start_simple (setup)" {
		t.Errorf("log line %q: want time, \"--temp 0.8\" and the test", logged)
	}
}

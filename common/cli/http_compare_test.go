package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
)

// fakeServeEnv makes the test binary, started by a wrapper script, act as
// a server runnable: TestFakeServeProcess serves the fake on the -port it
// is given until SIGTERM.
const fakeServeEnv = "KVLAB_TEST_FAKE_SERVE"

func TestFakeServeProcess(t *testing.T) {
	if os.Getenv(fakeServeEnv) != "1" {
		t.Skip("runs only as a server process started by TestCompareOverHTTP")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	host := fs.String("host", "", "")
	port := fs.String("port", "", "")
	fs.Bool("prefix-caching", false, "")
	fs.String("admission", "", "")
	fs.Int("blocks", 0, "")
	require.Equal(t, "serve", args[0])
	require.NoError(t, fs.Parse(args[1:]))
	os.Stdout.WriteString("fake serve " + strings.Join(args, " ") + "\n")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, *port))
	require.NoError(t, err)
	srv := &http.Server{Handler: &fakeServer{t: t, perChunk: 2}}
	go srv.Serve(ln)
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute): // never outlive the test run
	}
	require.NoError(t, srv.Shutdown(context.Background()))
}

// fakeRunnable writes a script that starts this test binary as a fake
// server runnable (or runs body instead, when not empty).
func fakeRunnable(t *testing.T, name, body string) string {
	t.Helper()
	if body == "" {
		body = "KVLAB_TEST_FAKE_SERVE=1 exec " + os.Args[0] + " -test.run='^TestFakeServeProcess$' -- \"$@\""
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

func compareArgs(logs string, extra ...string) []string {
	return append([]string{"-workload", "prefix_caching", "-requests", "4", "-prefix-len", "8",
		"-suffix-min", "2", "-suffix-max", "3", "-min-tokens", "2", "-max-tokens", "3", "-rps", "100",
		"-vocab", "40", "-quiet", "-plot", "", "-server-logs", logs,
		"-server-start-timeout", "20s", "-server-stop-timeout", "10s", "-request-timeout", "10s"}, extra...)
}

var testDesign = []Variant{{Name: "design", PrefixCache: func(*kvcache.Allocator, int) kvcache.PrefixCache { return nil }}}

func TestCompareOverHTTP(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake runnables are shell scripts")
	}
	logs := t.TempDir()
	servers := fakeRunnable(t, "base", "") + "," + fakeRunnable(t, "design", "")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Compare(testDesign, compareArgs(logs, "-servers", servers, "-blocks", "64"), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Less(t, time.Since(start), 30*time.Second)

	out := stdout.String()
	assert.Contains(t, out, "baseline")
	assert.Contains(t, out, "design")
	assert.Contains(t, out, "outputs: design generated exactly the baseline's tokens for all 4 requests")

	// Both servers got the engine flag set here; only the design's cache.
	base, err := os.ReadFile(filepath.Join(logs, "base.log"))
	require.NoError(t, err)
	design, err := os.ReadFile(filepath.Join(logs, "design.log"))
	require.NoError(t, err)
	assert.Contains(t, string(base), "serve -blocks=64 -host=127.0.0.1 -port=")
	assert.NotContains(t, string(base), "-prefix-caching")
	assert.Contains(t, string(design), "serve -blocks=64 -prefix-caching -admission=cost-aware")
	assert.Contains(t, string(design), "PASS", "the server exited cleanly on SIGTERM")
}

func TestCompareOverHTTPServerThatDoesNotComeUp(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake runnables are shell scripts")
	}
	logs := t.TempDir()
	good := fakeRunnable(t, "base", "")

	var stdout, stderr bytes.Buffer
	crash := fakeRunnable(t, "crash", "echo 'cannot load the model' >&2; exit 3")
	code := Compare(testDesign, compareArgs(logs, "-servers", good+","+crash), &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "exited before answering")
	assert.Contains(t, stderr.String(), "cannot load the model")

	stderr.Reset()
	start := time.Now()
	mute := fakeRunnable(t, "mute", "exec sleep 30")
	code = Compare(testDesign, append(compareArgs(logs, "-servers", mute+","+good), "-server-start-timeout", "300ms"), &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "no 200 from")
	assert.Less(t, time.Since(start), 10*time.Second, "the mute server was stopped, not waited for")

	stderr.Reset()
	code = Compare(testDesign, compareArgs(logs, "-servers", good), &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "want 2 runnables")
}

func TestChildStopKillsAServerThatIgnoresSIGTERM(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell script")
	}
	script := fakeRunnable(t, "stubborn", "trap '' TERM; echo ready; while :; do sleep 0.05; done")
	c, err := StartChild(script, nil, filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // let the trap be set
	err = c.Stop(300 * time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")
	select {
	case <-c.exited:
	default:
		t.Fatal("the child is still running")
	}
	var exitErr *exec.ExitError
	assert.True(t, errors.As(c.err, &exitErr))
}

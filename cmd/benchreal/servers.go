package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"kvlab/common/cli"
)

// side is one row of the tables: one of the two servers, as shipped or
// with extra arguments.
type side struct {
	name   string   // the row's label: the server, then its extra arguments
	server string   // serverServe or serverLlama: which program runs
	extra  []string // -serve-arg or -llama-arg; nil in the default row
	// argv returns the command line that serves model m on port
	// (port < 0: without the port flag, for benchstartup, which appends
	// its own "-port N").
	argv func(m *prepared, port int) []string
}

// The two programs a side can run.
const (
	serverServe = "serve"
	serverLlama = "llama-server"
)

// tuned reports whether the side's row runs with arguments beyond the
// defaults (defaults.go).
func (sd side) tuned() bool { return len(sd.extra) > 0 }

// rowLabel names a side's row: the server alone for the default row,
// "serve -bf16-dot=false" for one run with extra arguments.
func rowLabel(server string, extra []string) string {
	return strings.Join(append([]string{server}, extra...), " ")
}

// logName is label as a piece of a file name: the characters a shell
// would trip on become "_".
func logName(label string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '=':
			return r
		}
		return '_'
	}, label)
}

// prepared is a model written to disk and ready to serve.
type prepared struct {
	shape
	dir  string // the HF checkpoint
	gguf string // its GGUF export ("" without llama.cpp)
}

// settings are the flags both servers' command lines come from.
type settings struct {
	bin         string // this project's runnable (phase08_prefix)
	llamaServer string // llama-server, or ""
	threads     int
	ctx         int // tokens of KV cache each server holds
	slots       int // llama-server's -np: the serving run's concurrency
	serveArgs   []string
	llamaArgs   []string
}

// sides are the rows every model gets: serve and llama-server (when there
// is one) as shipped, then each with the extra arguments, if any.
func (s *settings) sides() []side {
	out := []side{s.serveSide(nil)}
	if s.llamaServer != "" {
		out = append(out, s.llamaSide(nil))
	}
	if len(s.serveArgs) > 0 {
		out = append(out, s.serveSide(s.serveArgs))
	}
	if s.llamaServer != "" && len(s.llamaArgs) > 0 {
		out = append(out, s.llamaSide(s.llamaArgs))
	}
	return out
}

// serveSide is `phase08_prefix serve` with the default flags
// (serveDefaults), then extra, and GOMAXPROCS (set in the environment by
// run) as its threads.
func (s *settings) serveSide(extra []string) side {
	return side{name: rowLabel(serverServe, extra), server: serverServe, extra: extra, argv: func(m *prepared, port int) []string {
		a := append([]string{s.bin, "serve", "-model", m.dir}, flagsOf(s.serveDefaults())...)
		a = append(a, extra...)
		if port >= 0 {
			a = append(a, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
		}
		return a
	}}
}

// llamaSide is llama-server with the default flags (llamaDefaults), then
// extra.
func (s *settings) llamaSide(extra []string) side {
	return side{name: rowLabel(serverLlama, extra), server: serverLlama, extra: extra, argv: func(m *prepared, port int) []string {
		a := append([]string{s.llamaServer, "-m", m.gguf}, flagsOf(s.llamaDefaults())...)
		a = append(a, extra...)
		if port >= 0 {
			a = append(a, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
		}
		return a
	}}
}

// running is a server started for the measurements.
type running struct {
	side
	url   string
	child *cli.Child
}

// start starts sd on model m, its output in logPath, and waits for its
// /health.
func start(ctx context.Context, sd side, m *prepared, logPath string) (*running, error) {
	port, err := cli.FreePort()
	if err != nil {
		return nil, err
	}
	argv := sd.argv(m, port)
	c, err := cli.StartChild(argv[0], argv[1:], logPath)
	if err != nil {
		return nil, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := c.WaitHealthy(ctx, url, 10*time.Minute); err != nil {
		c.Kill()
		return nil, fmt.Errorf("%s: %w", sd.name, err)
	}
	return &running{side: sd, url: url, child: c}, nil
}

// portScript is the wrapper benchstartup runs llama-server through: it
// appends "-port N", which llama-server spells --port. exec keeps the
// process id, so the RSS benchstartup reads is llama-server's.
const portScript = `#!/bin/sh
# benchreal: pass benchstartup's "-port N" to llama-server as "--port N".
bin=$1
shift
for a; do
	shift
	if [ "$a" = -port ]; then a=--port; fi
	set -- "$@" "$a"
done
exec "$bin" "$@"
`

// startup is one start of a server, as benchstartup reports it.
type startup struct {
	listening, first time.Duration
	rss              float64 // MiB, after its second request
}

var startupLine = regexp.MustCompile(`listening ([0-9.]+) s, first answer ([0-9.]+) s, second request [0-9.]+ s; RSS ([0-9.]+) MiB`)

// parseStartup reads benchstartup's "run 0: ..." line.
func parseStartup(out []byte) (startup, error) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("run ")) {
			continue
		}
		m := startupLine.FindSubmatch(line)
		if m == nil {
			return startup{}, fmt.Errorf("benchstartup printed %q", line)
		}
		l, _ := strconv.ParseFloat(string(m[1]), 64)
		f, _ := strconv.ParseFloat(string(m[2]), 64)
		r, _ := strconv.ParseFloat(string(m[3]), 64)
		return startup{listening: seconds(l), first: seconds(f), rss: r}, nil
	}
	return startup{}, fmt.Errorf("no run line in benchstartup's output:\n%s", out)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// measureStartup runs cmd/benchstartup once on sd serving m: exec to the
// first answer, and the RSS then.
func measureStartup(benchstartup, work string, sd side, m *prepared) (startup, error) {
	argv := sd.argv(m, -1)
	if sd.server == serverLlama {
		script := filepath.Join(work, "llama-server-port.sh")
		if err := os.WriteFile(script, []byte(portScript), 0o755); err != nil {
			return startup{}, err
		}
		argv = append([]string{script}, argv...)
	}
	cmd := exec.Command(benchstartup, append([]string{"-runs", "1", "--"}, argv...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return startup{}, fmt.Errorf("benchstartup on %s: %v\n%s", sd.name, err, strings.TrimSpace(errb.String()))
	}
	return parseStartup(out.Bytes())
}

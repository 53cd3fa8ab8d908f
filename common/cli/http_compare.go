package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvlab/common/metrics"
	"kvlab/common/workload"
)

// serverFlags are compare's flags for running every configuration as its
// own server and measuring it over HTTP.
type serverFlags struct {
	servers      string
	startTimeout time.Duration
	stopTimeout  time.Duration
	timeout      time.Duration
	logDir       string
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.servers, "servers", "", "comma-separated runnables (the baseline's, then one per design in the table's order) to start as "+
		"'serve' on free loopback ports and benchmark over HTTP one after the other, instead of the engines in this process")
	fs.DurationVar(&f.startTimeout, "server-start-timeout", 2*time.Minute, "with -servers: how long a server may take to answer /health")
	fs.DurationVar(&f.stopTimeout, "server-stop-timeout", 45*time.Second, "with -servers: how long a server may take to exit after SIGTERM before it is killed")
	fs.DurationVar(&f.timeout, "request-timeout", 10*time.Minute, "with -servers: a request not finished after this long fails")
	fs.StringVar(&f.logDir, "server-logs", filepath.Join("out", "phase08-http-logs"), "with -servers: directory for each server's output")
}

// engineFlagNames are the runtime flags a server takes as they are; the
// ones set on compare's command line are passed on to every server.
var engineFlagNames = []string{"model", "arch", "device", "block-size", "blocks", "max-batch-tokens", "max-running", "max-context", "chunked-prefill", "audit"}

// compareHTTP is compare -servers: each configuration runs as a server
// process (`<runnable> serve`, with -prefix-caching for the designs), the
// same requests are replayed against each over HTTP, and the runs are
// reported in one table and checked for identical tokens.
func compareHTTP(fs *flag.FlagSet, variants []Variant, srv serverFlags, rf *runtimeFlags, sf *servingFlags, stdout, stderr io.Writer) error {
	bins := strings.Split(srv.servers, ",")
	if len(bins) != len(variants)+1 {
		return fmt.Errorf("-servers: want %d runnables (the baseline's, then %d designs'), have %d", len(variants)+1, len(variants), len(bins))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var common []string
	for _, name := range engineFlagNames {
		if set[name] {
			common = append(common, "-"+name+"="+fs.Lookup(name).Value.String())
		}
	}
	if !set["plot"] {
		sf.plotPath = plotName("phase08-http", rf, sf.name)
	}
	reqs, err := sf.requests(rf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(srv.logDir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	progress := sf.progress(stderr)
	var runs []*metrics.Run
	var na [][]string
	for i, bin := range bins {
		name, args := "baseline", append([]string{"serve"}, common...)
		if i > 0 {
			name = variants[i-1].Name
			args = append(args, "-prefix-caching", "-admission="+rf.admission)
			if rf.share > 0 { // the designs' servers only: the baseline has no cache to cap
				args = append(args, fmt.Sprintf("-tenant-cache-share=%v", rf.share))
			}
		}
		fmt.Fprintf(stderr, "[%d/%d] %s: %s, %d requests over HTTP\n", i+1, len(bins), name, sf.name, len(reqs))
		run, runNA, err := benchServer(ctx, bin, args, srv, rf.eng.BlockSize, name, reqs, progress, stderr)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", name, bin, err)
		}
		runs = append(runs, run)
		na = append(na, runNA)
	}
	return reportHTTP(stdout, runs, na, sf.reportOptions(fmt.Sprintf("%s over HTTP (%d requests)", sf.name, len(reqs))))
}

// benchServer starts bin with args on a free loopback port, waits for its
// /health, replays reqs against it and stops it with SIGTERM.
func benchServer(ctx context.Context, bin string, args []string, srv serverFlags, blockSize int, name string, reqs []workload.Request, progress, log io.Writer) (*metrics.Run, []string, error) {
	port, err := FreePort()
	if err != nil {
		return nil, nil, err
	}
	args = append(args, "-host=127.0.0.1", "-port="+strconv.Itoa(port))
	logPath := filepath.Join(srv.logDir, filepath.Base(bin)+".log")
	c, err := StartChild(bin, args, logPath)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(log, "      %s %s (output in %s)\n", bin, strings.Join(args, " "), logPath)
	defer func() {
		if err := c.Stop(srv.stopTimeout); err != nil {
			fmt.Fprintf(log, "      %s: %v\n", name, err)
		}
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := c.WaitHealthy(ctx, url, srv.startTimeout); err != nil {
		return nil, nil, err
	}
	t := httpTarget{url: url, timeout: srv.timeout, blockSize: blockSize}
	return benchHTTP(ctx, t, name, reqs, progress)
}

// FreePort returns a loopback TCP port nothing listens on at the moment.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Child is a server process started on this machine, its output going to
// a log file: compare -servers starts its servers with it, and so does the
// router of phase08_router its replicas.
type Child struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	err     error         // its exit status, once exited is closed
}

// StartChild starts bin with args, its output going to logPath. The process is
// killed if this one dies first (where the system allows; see
// setChildAttrs).
func StartChild(bin string, args []string, logPath string) (*Child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	setChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	c := &Child{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.exited)
	}()
	return c, nil
}

// WaitHealthy polls url/health until it answers 200, the process exits
// (an error with the end of its output), ctx ends or timeout passes.
func (c *Child) WaitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(url + "/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			return fmt.Errorf("the server exited before answering %s/health (%v); its output:\n%s", url, c.err, c.LogTail())
		case <-deadline.C:
			return fmt.Errorf("no 200 from %s/health within %v; its output:\n%s", url, timeout, c.LogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit,
// then kills it. It reports a failed exit, which on SIGTERM means the
// server's shutdown found something wrong.
func (c *Child) Stop(timeout time.Duration) error {
	select {
	case <-c.exited:
		return fmt.Errorf("the server had already exited (%v)", c.err)
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.cmd.Process.Kill()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.exited:
		if c.err != nil {
			return fmt.Errorf("exit after SIGTERM: %v; the end of its output:\n%s", c.err, c.LogTail())
		}
		return nil
	case <-t.C:
		c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("killed: still running %v after SIGTERM", timeout)
	}
}

// Kill ends the process at once (SIGKILL), as a crash would, and waits for
// it to exit.
func (c *Child) Kill() {
	c.cmd.Process.Kill()
	<-c.exited
}

// Exited is closed when the process has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// LogTail returns the last lines of the server's output.
func (c *Child) LogTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	lines = lines[max(len(lines)-20, 0):]
	return "  " + string(bytes.Join(lines, []byte("\n  ")))
}

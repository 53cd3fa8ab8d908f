package router

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"kvlab/common/cli"
)

// Designs maps --design to the runnable that serves it and whether it
// runs with -prefix-caching.
var Designs = map[string]struct {
	Runnable string
	Cached   bool
}{
	"baseline":   {"phase07_chunked", false},
	"prefix":     {"phase08_prefix", true},
	"hashcow":    {"phase08_hashcow", true},
	"compressed": {"phase08_compressed", true},
}

// FindRunnable returns the path of the named runnable's binary: in dir when
// dir is set; otherwise beside this program's own binary, then in bin/
// (where make builds them), then on PATH.
func FindRunnable(name, dir string) (string, error) {
	if dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("replica binary: %w", err)
		}
		return p, nil
	}
	var tries []string
	if self, err := os.Executable(); err == nil {
		tries = append(tries, filepath.Join(filepath.Dir(self), name))
	}
	tries = append(tries, filepath.Join("bin", name))
	for _, p := range tries {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no %s binary beside this program, in bin/ or on PATH: build it (go build -o bin/ ./%s) or name its folder with --bin-dir", name, name)
}

// Fleet is replicas the router started as child processes, each
// `<runnable> serve` on its own loopback port.
type Fleet struct {
	URLs     []string
	children []*cli.Child
}

// FleetOptions says what to start.
type FleetOptions struct {
	Binary string   // the runnable's binary
	Args   []string // serve's flags, without -host and -port
	N      int
	LogDir string // each replica's output goes to LogDir/replica-<i>.log
	// StartTimeout bounds the wait for every replica's /health.
	StartTimeout time.Duration
	// Command, if set, gives replica i's whole argument list for a
	// listening port, for a binary that is not a runnable (llama-server);
	// Args is then unused.
	Command func(i, port int) []string
}

// StartFleet starts o.N replicas and waits until each answers /health. On
// failure it stops the ones it started.
func StartFleet(ctx context.Context, o FleetOptions) (*Fleet, error) {
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, err
	}
	f := &Fleet{}
	for i := range o.N {
		port, err := cli.FreePort()
		if err != nil {
			f.Stop(5 * time.Second)
			return nil, err
		}
		args := append(append([]string{"serve"}, o.Args...), "-host=127.0.0.1", "-port="+strconv.Itoa(port))
		if o.Command != nil {
			args = o.Command(i, port)
		}
		c, err := cli.StartChild(o.Binary, args, filepath.Join(o.LogDir, fmt.Sprintf("replica-%d.log", i)))
		if err != nil {
			f.Stop(5 * time.Second)
			return nil, err
		}
		f.children = append(f.children, c)
		f.URLs = append(f.URLs, "http://127.0.0.1:"+strconv.Itoa(port))
	}
	for i, c := range f.children {
		if err := c.WaitHealthy(ctx, f.URLs[i], o.StartTimeout); err != nil {
			f.Stop(5 * time.Second)
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
	}
	return f, nil
}

// Kill ends replica i at once, as a crash would.
func (f *Fleet) Kill(i int) { f.children[i].Kill() }

// Stop asks every replica to shut down (SIGTERM), killing the ones that
// outlive timeout, and reports the ones that did not exit cleanly.
func (f *Fleet) Stop(timeout time.Duration) error {
	var errs []error
	for i, c := range f.children {
		select {
		case <-c.Exited():
			continue // killed on purpose, or already gone: nothing to stop
		default:
		}
		if err := c.Stop(timeout); err != nil {
			errs = append(errs, fmt.Errorf("replica %d: %w", i, err))
		}
	}
	f.children = nil
	return errors.Join(errs...)
}

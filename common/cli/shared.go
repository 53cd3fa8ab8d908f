package cli

import (
	"context"
	"time"
)

// This file exports, for other commands that drive servers (the router of
// phase08_router), what bench -url and compare -servers already use: the
// HTTP client engine and the child-process handling. The wrappers add no
// behaviour, so both users run the same code.

// HTTPEngine is the workload.Engine that bench -url drives: each request is
// one streamed POST /v1/completions (greedy, ignore_eos, return_token_ids,
// usage included), timed where its bytes are read. It also reports each
// request's cached_tokens (workload.CacheReporter).
type HTTPEngine struct{ *httpEngine }

// NewHTTPEngine returns a client of the server at url sending model as the
// model name ("" leaves it out); timeout bounds each request (0: none).
// Cancelling ctx aborts every stream. Close it when the run is over.
func NewHTTPEngine(ctx context.Context, url, model string, timeout time.Duration) HTTPEngine {
	return HTTPEngine{newHTTPEngine(ctx, url, model, timeout)}
}

// Child is a server process started on this machine, its output going to a
// log file; on Linux it is sent SIGTERM if this process dies first.
type Child struct{ c *child }

// StartChild starts bin with args, writing its output to logPath.
func StartChild(bin string, args []string, logPath string) (*Child, error) {
	c, err := startChild(bin, args, logPath)
	if err != nil {
		return nil, err
	}
	return &Child{c}, nil
}

// WaitHealthy polls url/health until it answers 200, the process exits
// (an error with the end of its output), ctx ends or timeout passes.
func (c *Child) WaitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	return c.c.waitHealthy(ctx, url, timeout)
}

// Stop sends SIGTERM, waits up to timeout, then kills. It reports an exit
// that was not clean.
func (c *Child) Stop(timeout time.Duration) error { return c.c.stop(timeout) }

// Kill ends the process at once (SIGKILL), as a crash would, and waits for
// it to exit.
func (c *Child) Kill() {
	c.c.cmd.Process.Kill()
	<-c.c.exited
}

// Exited is closed when the process has exited.
func (c *Child) Exited() <-chan struct{} { return c.c.exited }

// LogTail returns the last lines of the process's output.
func (c *Child) LogTail() string { return c.c.logTail() }

// FreePort returns a loopback TCP port nothing listens on at the moment.
func FreePort() (int, error) { return freePort() }

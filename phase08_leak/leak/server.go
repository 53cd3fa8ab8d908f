package leak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"kvlab/common/cli"
)

// Server is a `serve` of one runnable running in this process on a real
// loopback listener: the attacker's requests cross a TCP socket and the
// server's HTTP stack, as they would from another machine.
type Server struct {
	URL    string
	cancel context.CancelFunc
	done   chan error
}

// StartServer runs v's serve command with args (plus a free loopback port)
// until Stop. log receives the server's log.
func StartServer(ctx context.Context, v cli.Variant, args []string, log io.Writer) (*Server, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	args = append([]string{"-host", "127.0.0.1", "-port", "0", "-shutdown-timeout", "5s"}, args...)
	go func() { s.done <- cli.Serve(ctx, v, args, func(addr string) { ready <- addr }, log) }()
	select {
	case addr := <-ready:
		s.URL = "http://" + addr
	case err := <-s.done:
		cancel()
		return nil, fmt.Errorf("leak: serve %v: %w", args, err)
	case <-time.After(2 * time.Minute):
		cancel()
		return nil, fmt.Errorf("leak: serve %v did not start in 2 minutes", args)
	}
	return s, nil
}

// Client returns a client of s with its own connection pool.
func (s *Server) Client() Client {
	return Client{URL: s.URL, HTTP: &http.Client{Transport: &http.Transport{}}}
}

// Stop shuts the server down and returns its error, if any.
func (s *Server) Stop() error {
	s.cancel()
	return <-s.done
}

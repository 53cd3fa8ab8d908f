// Package httpx holds the HTTP limits every server of the project applies
// to its clients (serve and the router): how long a request's headers and
// body may take to arrive, how long an idle keep-alive connection is kept,
// and how many connections are open at once. Without them a client that
// dribbles its body holds a goroutine and a file descriptor for as long as
// it likes, and some thousands of such clients use up the process's
// descriptors (accept4: too many open files), after which even /health
// stops answering.
//
// What it deliberately does not set: http.Server.WriteTimeout, which
// bounds the whole response and would cut every stream at a fixed length
// (per-write deadlines are the handlers' own), and http.Server.ReadTimeout.
// ReadTimeout arms one read deadline for headers and body together; a
// body that misses it reaches the handler as a bare "i/o timeout", which
// the handlers answer 400 like any broken body. (It would not cut a long
// stream in this Go: net/http clears the read deadline when, the body
// read, it starts watching the connection for the client hanging up, and
// a deadline firing in that watch would cancel the request.) The body
// deadline here is set per request on the connection
// (http.ResponseController.SetReadDeadline) once the headers are in,
// cleared as soon as the body has been read, and a body that misses it is
// answered 408 with the flag's name.
package httpx

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Limits are the bounds a server puts on its clients' connections.
type Limits struct {
	// HeaderTimeout bounds the wait for a request's headers
	// (http.Server.ReadHeaderTimeout).
	HeaderTimeout time.Duration
	// BodyTimeout bounds the wait for a request's whole body, from the
	// moment its headers were read; a body not read in time is answered
	// 408. llama-server's --timeout (600 s) is its read timeout.
	BodyTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request before it is closed.
	IdleTimeout time.Duration
	// MaxConns caps the open client connections; one over the cap is
	// answered 503 and closed at once (Listener). 0: no cap.
	MaxConns int
}

// Defaults of Limits, and of the flags Register adds.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 600 * time.Second // llama-server's --timeout
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultMaxConns      = 4096
)

// DefaultLimits returns the limits of the flags' defaults.
func DefaultLimits() Limits {
	return Limits{HeaderTimeout: DefaultHeaderTimeout, BodyTimeout: DefaultBodyTimeout, IdleTimeout: DefaultIdleTimeout, MaxConns: DefaultMaxConns}
}

// Register adds the limits' flags to fs, with l's values as defaults:
// -header-timeout, -timeout, -idle-timeout and -max-conns.
func (l *Limits) Register(fs *flag.FlagSet) {
	fs.DurationVar(&l.HeaderTimeout, "header-timeout", l.HeaderTimeout, "close a connection whose request headers have not arrived within this time")
	fs.DurationVar(&l.BodyTimeout, "timeout", l.BodyTimeout, "answer 408 to a request whose body has not arrived within this time of its headers (llama-server's --timeout is 600 s); a response, however long it streams, is not bounded by it")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "close a keep-alive connection that sends no new request within this time")
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "most client connections open at once; one more is answered 503 and closed (0: no cap)")
}

// Validate refuses limits that could not work, naming the flag.
func (l Limits) Validate() error {
	switch {
	case l.HeaderTimeout <= 0:
		return fmt.Errorf("-header-timeout must be > 0, have %v", l.HeaderTimeout)
	case l.BodyTimeout <= 0:
		return fmt.Errorf("-timeout must be > 0, have %v", l.BodyTimeout)
	case l.IdleTimeout <= 0:
		return fmt.Errorf("-idle-timeout must be > 0, have %v", l.IdleTimeout)
	case l.MaxConns < 0:
		return fmt.Errorf("-max-conns must be ≥ 0 (0: no cap), have %d", l.MaxConns)
	}
	return nil
}

// Server returns an http.Server for h under the limits: the header and
// idle timeouts set, and h wrapped so that every request body has its
// deadline (BodyDeadline). Serve it on Listen's listener for the cap.
func (l Limits) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           BodyDeadline(h, l.BodyTimeout),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
	}
}

// Listen wraps ln so that at most l.MaxConns connections are open at once
// (none, with MaxConns 0).
func (l Limits) Listen(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	return Listener(ln, l.MaxConns)
}

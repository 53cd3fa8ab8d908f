package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// How the router survives a bad replica, beside the health checker (which
// trusts /health, and a replica can answer /health while failing every
// request):
//
//   - timeouts per attempt: connecting (Options.ConnectTimeout), the
//     replica's response headers (ResponseTimeout: for a stream its first
//     event, for a JSON answer the whole answer) and the wait between two
//     reads of its answer (IdleTimeout: a stream that stalls);
//   - retries: an attempt that fails before a byte reached the client —
//     refused, timed out, any 5xx, broken — is tried again on a replica not
//     yet tried, at most Options.Retries times; once bytes reached the
//     client, never (they would be sent twice);
//   - passive outlier ejection, as Envoy's consecutive_5xx: EjectAfter
//     failures in a row take a replica out for EjectTime, the n-th ejection
//     in a row for n times EjectTime (at most MaxEjectTime); it is then
//     tried again, and its first success forgets its ejections. At most
//     MaxEjectPercent of the fleet is ejected at once (at least one
//     replica), and never the last replica taking requests; if every
//     replica up is ejected even so (the others went down since), the
//     ejected ones are tried rather than refusing the request.

// Defaults of the Options of this file.
const (
	DefaultConnectTimeout  = 5 * time.Second
	DefaultResponseTimeout = 600 * time.Second // llama-server's --timeout
	DefaultIdleTimeout     = 120 * time.Second
	DefaultRetries         = 2
	DefaultEjectAfter      = 5 // Envoy's consecutive_5xx
	DefaultEjectTime       = 30 * time.Second
	DefaultMaxEjectTime    = 300 * time.Second
	DefaultMaxEjectPercent = 10
)

// resilienceDefaults fills the zero fields of o with the defaults and
// refuses values that could not work.
func resilienceDefaults(o *Options) error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.ResponseTimeout, DefaultResponseTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.EjectTime, DefaultEjectTime)
	def(&o.MaxEjectTime, DefaultMaxEjectTime)
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.EjectAfter == 0 {
		o.EjectAfter = DefaultEjectAfter
	}
	if o.MaxEjectPercent == 0 {
		o.MaxEjectPercent = DefaultMaxEjectPercent
	}
	switch {
	case o.ConnectTimeout < 0 || o.ResponseTimeout < 0 || o.IdleTimeout < 0:
		return fmt.Errorf("router: ConnectTimeout, ResponseTimeout and IdleTimeout must be > 0 (0: the default)")
	case o.EjectTime < 0 || o.MaxEjectTime < o.EjectTime:
		return fmt.Errorf("router: EjectTime must be > 0 and MaxEjectTime at least EjectTime, have %v and %v", o.EjectTime, o.MaxEjectTime)
	case o.MaxEjectPercent < 0 || o.MaxEjectPercent > 100:
		return fmt.Errorf("router: MaxEjectPercent must be in [1, 100] (0: the default), have %d", o.MaxEjectPercent)
	}
	return nil
}

// The causes an attempt's context is cancelled with when a timeout fires.
var (
	errResponseTimeout = errors.New("no response headers within the response timeout")
	errIdleTimeout     = errors.New("nothing read within the idle timeout")
	errHung            = errors.New("the replica's /health timed out: moved to another replica")
)

// failure is why an attempt at a replica failed: its reason in the
// router's metrics (connect, response_timeout, idle_timeout, hung,
// status_5xx, broken), and whether it also takes the replica out until its /health
// answers again (down: the replica is gone or going, and its cache with
// it). A timeout or a 500 does not: the replica may be overloaded, not
// gone; ejection handles one that keeps failing.
type failure struct {
	reason  string
	down    bool
	timeout bool
	err     error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// transportFailure classifies an error of a request to a replica or of
// reading its answer; ctx is the attempt's context. It returns nil when
// the client went away (nothing to count against the replica).
func transportFailure(ctx, client context.Context, err error) *failure {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errResponseTimeout):
		return &failure{reason: "response_timeout", timeout: true, err: cause}
	case errors.Is(cause, errIdleTimeout):
		return &failure{reason: "idle_timeout", timeout: true, err: cause}
	case errors.Is(cause, errHung):
		return &failure{reason: "hung", timeout: true, err: cause}
	case client.Err() != nil:
		return nil
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &failure{reason: "connect", down: true, err: err}
	}
	return &failure{reason: "broken", down: true, err: err}
}

// statusFailure is a 5xx answer. 502 and 503 also take the replica out:
// it is shutting down, or a proxy that lost its backend.
func statusFailure(code int) *failure {
	return &failure{reason: "status_5xx", down: code == 502 || code == 503, err: fmt.Errorf("answered %d", code)}
}

// idleReader reads a replica's answer under an idle timeout: the timer
// runs while a Read waits and fires cancel when it waits too long.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func newIdleReader(r io.Reader, d time.Duration, cancel func()) *idleReader {
	t := time.AfterFunc(d, cancel)
	t.Stop()
	return &idleReader{r: r, timer: t, d: d}
}

func (ir *idleReader) Read(p []byte) (int, error) {
	ir.timer.Reset(ir.d)
	n, err := ir.r.Read(p)
	ir.timer.Stop() // the time spent writing to the client is not the replica's
	return n, err
}

// pend registers cancel, an attempt at replica i that nothing of has
// reached the client yet; the returned func unregisters it, and is called
// once the first byte is on its way to the client.
func (rt *Router) pend(i int, cancel context.CancelCauseFunc) func() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.pendSeq++
	id, r := rt.pendSeq, rt.replicas[i]
	if r.pending == nil {
		r.pending = map[uint64]context.CancelCauseFunc{}
	}
	r.pending[id] = cancel
	return func() {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		delete(r.pending, id)
	}
}

// cancelPending cancels every attempt at replica i that nothing of has
// reached the client: each is retried elsewhere.
func (rt *Router) cancelPending(i int) {
	rt.mu.Lock()
	r := rt.replicas[i]
	cancels := r.pending
	r.pending = nil
	rt.mu.Unlock()
	for _, c := range cancels {
		c(errHung)
	}
}

// failed records a failed attempt at replica i and ejects the replica
// when it has failed EjectAfter times in a row and may be ejected.
func (rt *Router) failed(i int, f *failure) {
	rt.metrics.failures.WithLabelValues(strconv.Itoa(i), f.reason).Inc()
	if rt.opts.EjectAfter < 0 {
		return
	}
	now := time.Now()
	rt.mu.Lock()
	r := rt.replicas[i]
	r.failures++
	eject := r.failures >= rt.opts.EjectAfter && !r.ejectedAt(now) && rt.mayEjectLocked(i, now)
	if eject {
		r.ejections++
		r.ejectedUntil = now.Add(rt.opts.ejection(r.ejections))
		r.failures = 0
	}
	rt.mu.Unlock()
	if eject {
		rt.metrics.ejections.WithLabelValues(strconv.Itoa(i)).Inc()
	}
}

// ejection is how long the n-th ejection in a row lasts: n times
// EjectTime, at most MaxEjectTime (Envoy's rule).
func (o *Options) ejection(n int) time.Duration {
	return min(o.EjectTime*time.Duration(n), o.MaxEjectTime)
}

// succeeded records an answer that was not a failure: the replica's
// failures in a row start again from 0, and after an ejection has run
// out, its ejections too.
func (rt *Router) succeeded(i int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r := rt.replicas[i]
	r.failures = 0
	if !r.ejectedAt(time.Now()) {
		r.ejections = 0
	}
}

// ejectedAt reports whether the replica is ejected at now.
func (r *replica) ejectedAt(now time.Time) bool { return now.Before(r.ejectedUntil) }

// mayEjectLocked reports whether replica i may be ejected now: another
// replica still takes requests, and the ejected ones stay within
// MaxEjectPercent of the fleet (at least one may always be). rt.mu is
// held.
func (rt *Router) mayEjectLocked(i int, now time.Time) bool {
	ejected, others := 0, 0
	for _, r := range rt.replicas {
		switch {
		case r.index == i:
		case r.ejectedAt(now):
			ejected++
		case r.up:
			others++
		}
	}
	return others > 0 && ejected+1 <= max(1, len(rt.replicas)*rt.opts.MaxEjectPercent/100)
}

// Ejected reports which replicas are ejected now.
func (rt *Router) Ejected() []bool {
	now := time.Now()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]bool, len(rt.replicas))
	for i, r := range rt.replicas {
		out[i] = r.ejectedAt(now)
	}
	return out
}

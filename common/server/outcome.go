package server

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Every request a generation endpoint receives ends in exactly one outcome,
// counted once when its handler returns:
//
//	stop, length  the generation ended as asked (an end-of-turn token or a
//	              stop string; max_tokens or the context limit), counted in
//	              kvlab:request_success_total{finished_reason}
//	abort         the client went away, fell too far behind
//	              (engine.Limits.MaxUnread), or the server shut down
//	              mid-generation; also in request_success_total, as vLLM
//	              counts it
//	error         the engine failed the request after accepting it, or
//	              serving it panicked (recover.go), in
//	              kvlab:request_failure_total{reason="error"}
//	rejected      refused before the engine ran it: bad input, an unknown
//	              model, a full queue, a shutdown; in
//	              kvlab:request_failure_total{reason="rejected"}
//
// so the two counters sum to the requests received. The handler records an
// outcome only once it knows it; a handler that returns without one
// refused the request.

// outcome is a request's outcome while its handler runs; "" until known.
// The prompts of one /completion run on goroutines of their own and each
// sets it: the gravest reason wins (outcomeRank), whatever the order.
type outcome struct {
	mu     sync.Mutex
	reason string
}

// outcomeRank orders the reasons from the least grave: an error outweighs
// an abort, which outweighs a length, which outweighs a stop, as
// genResult.outcome weighs one request's samples.
var outcomeRank = map[string]int{"": 0, "stop": 1, "length": 2, "abort": 3, "error": 4}

// set records reason unless a graver one is recorded.
func (oc *outcome) set(reason string) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if outcomeRank[reason] >= outcomeRank[oc.reason] {
		oc.reason = reason
	}
}

// get is the reason recorded.
func (oc *outcome) get() string {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.reason
}

type outcomeKey struct{}

// counted wraps a generation endpoint so that each request it serves is
// counted in exactly one outcome, and every write to the client has a
// deadline.
func (h *Handler) counted(serve func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		oc := &outcome{}
		defer func() {
			if p := recover(); p != nil {
				// Whatever the request had reached, a panic fails it;
				// ServeHTTP's guard answers it.
				oc.set("error")
				h.metrics.count(oc)
				panic(p)
			}
			h.metrics.count(oc)
		}()
		serve(h.deadlines(w), r.WithContext(context.WithValue(r.Context(), outcomeKey{}, oc)))
	}
}

// setOutcome records how the request of ctx ended.
func setOutcome(ctx context.Context, reason string) {
	if oc, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		oc.set(reason)
	}
}

// deadlineWriter gives every write to the client its own deadline: a
// client that stops reading makes a write fail after the timeout, which
// ends the handler and cancels the request, instead of holding a goroutine
// and a connection forever. net/http's Server.WriteTimeout would not do:
// it bounds the whole response, and a stream may rightly last minutes.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// DefaultWriteTimeout is Options.WriteTimeout's default.
const DefaultWriteTimeout = 30 * time.Second

func (h *Handler) deadlines(w http.ResponseWriter) http.ResponseWriter {
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: h.opts.WriteTimeout}
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) // unsupported writers (tests' recorders) have none
	return w.ResponseWriter.Write(b)
}

// Flush writes buffered bytes to the socket, under a fresh deadline too.
func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

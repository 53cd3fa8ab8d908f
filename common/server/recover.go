package server

import (
	"fmt"
	"net/http"
	"runtime/debug"
)

// A panic while serving one request must not take the server down with
// the others. net/http recovers a panic of the handler's own goroutine (and
// drops the connection without an answer), but not of a goroutine the
// handler starts — /completion runs each of its prompts on one — where a
// panic ends the process. So ServeHTTP and every goroutine a handler
// starts recover: the request is answered 500 (or cut off, if its answer
// had begun), the stack goes to Options.Log, and
// kvlab:request_panics_total counts it. The engine's goroutine is not
// covered: a panic there leaves no engine to serve with.

// testHooks are points where a test injects a fault through real HTTP;
// production leaves Options.hooks nil. Each func, when set, runs at its
// point.
type testHooks struct {
	// prompt runs in the goroutine /completion starts for prompt i,
	// before it generates.
	prompt func(i int)
	// text runs in /tokenize and /detokenize once the request holds its
	// place among Options.MaxTextRequests, before it tokenizes.
	text func()
}

// errPanicCode is the code of the 500 a recovered panic answers.
const errPanicCode = "internal_error"

// recovered turns a panic's value p into the request's error: it counts
// the panic and logs its stack. Call it from the deferred function that
// recovered p.
func (h *Handler) recovered(p any) *apiError {
	h.metrics.panics.Inc()
	fmt.Fprintf(h.opts.Log, "server: panic serving a request: %v\n%s", p, debug.Stack())
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: errPanicCode,
		Message: fmt.Sprintf("internal error: %v (the server logged it and goes on)", p)}
}

// guard serves r through serve and recovers a panic: a 500 while nothing
// was written, else the connection is cut (http.ErrAbortHandler), so the
// client sees a broken answer rather than a whole-looking one.
func (h *Handler) guard(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	g := &wroteGuard{ResponseWriter: w}
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler { // net/http's own way to cut a response: not a fault
			panic(p)
		}
		e := h.recovered(p)
		if g.wrote {
			panic(http.ErrAbortHandler)
		}
		writeError(w, e)
	}()
	serve(g, r)
}

// wroteGuard notes whether anything of the answer was written.
type wroteGuard struct {
	http.ResponseWriter
	wrote bool
}

func (g *wroteGuard) WriteHeader(code int) {
	g.wrote = true
	g.ResponseWriter.WriteHeader(code)
}

func (g *wroteGuard) Write(b []byte) (int, error) {
	g.wrote = true
	return g.ResponseWriter.Write(b)
}

// Flush lets a streaming handler flush through the guard.
func (g *wroteGuard) Flush() {
	g.wrote = true
	_ = http.NewResponseController(g.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (g *wroteGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

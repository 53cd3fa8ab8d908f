package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
)

// sideBySide runs run(ctx, i) for each of n prompts of one request, each
// on its own goroutine, and returns their failures, indexed as the
// prompts. The first failure cancels ctx for the others. net/http recovers
// only the handler's goroutine, so each of these recovers its own panic
// into that prompt's failure (recover.go) rather than ending the server.
func (h *Handler) sideBySide(parent context.Context, n int, run func(ctx context.Context, i int) *apiError) []*apiError {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	fails := make([]*apiError, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					fails[i] = h.recovered(p)
					cancel()
				}
			}()
			if h.opts.hooks.prompt != nil {
				h.opts.hooks.prompt(i)
			}
			if fails[i] = run(ctx, i); fails[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return fails
}

// reportFailure answers a request whose prompts ran side by side when any
// of them failed, and says whether one did. The first failure that is not
// a 499 is written (as an SSE error event once a stream is open): a 499 is
// a client gone, or a sibling cancelled after another prompt's failure,
// which is reported instead. A panic in any prompt makes the outcome an
// error, not the abort of the siblings it cancelled.
func reportFailure(w http.ResponseWriter, r *http.Request, out *sse, fails []*apiError) bool {
	if slices.ContainsFunc(fails, func(f *apiError) bool { return f != nil && f.Code == errPanicCode }) {
		setOutcome(r.Context(), "error")
	}
	for _, f := range fails {
		if f != nil && f.Status != 499 {
			if out != nil {
				out.fail(f)
			} else {
				writeError(w, f)
			}
			return true
		}
	}
	return slices.ContainsFunc(fails, func(f *apiError) bool { return f != nil })
}

package cli

import (
	"context"
	"time"
)

// This file exports, for other commands that drive servers (the router of
// phase08_router), the HTTP client engine that bench -url already uses.
// The wrapper adds no behaviour, so both users run the same code. (The
// child-process handling, Child and FreePort, is exported where it is
// defined, in http_compare.go.)

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

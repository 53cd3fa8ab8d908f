package server

import (
	"fmt"
	"net/http"
)

// DefaultMaxTextRequests is Options.MaxTextRequests' default: the
// /tokenize and /detokenize requests served at once.
//
// These endpoints do all their work on the handler's goroutine, outside
// the engine's queue: an 8 MiB body of text is a few million tokens to
// encode and tens of MB of answer to write. Their answers are written as
// they are made (textstream.go), so each holds its tokens and a 64 KiB
// buffer, not its whole answer; this bound caps how many do at once. One
// more is refused at once with 503 and Retry-After rather than queued: a
// client holding its own request open is the only waiting there is, and a
// router can send it elsewhere. The bound is taken once the body is read,
// so a slow body (bounded by the HTTP server's timeouts) holds no place.
const DefaultMaxTextRequests = 4

// enterText takes a place among the text requests being served; it
// returns false, having answered 503, when there is none. The caller
// calls leaveText when done.
func (h *Handler) enterText(w http.ResponseWriter, r *http.Request) bool {
	select {
	case h.text <- struct{}{}:
		return true
	default:
	}
	h.metrics.textBusy.Inc()
	w.Header().Set("Retry-After", "1")
	writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_busy",
		Message: fmt.Sprintf("the server is already serving %d /tokenize and /detokenize requests (--max-text-requests); retry %s later", cap(h.text), r.URL.Path)})
	return false
}

func (h *Handler) leaveText() { <-h.text }

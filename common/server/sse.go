package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// sse writes server-sent events: each event is one `data: ...` line and a
// blank line, flushed at once so the client sees every token when it is
// made, not when a buffer fills. Several generations may write to one
// stream (a /completion with several prompts): each event goes out whole.
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
	mu      sync.Mutex
	started bool
}

func newSSE(w http.ResponseWriter) *sse {
	f, _ := w.(http.Flusher)
	return &sse{w: w, flusher: f}
}

// start sends the headers; called before the first event.
func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	s.w.WriteHeader(http.StatusOK)
}

// send writes v as one JSON event.
func (s *sse) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(b)
}

// raw writes one event whose data is b.
func (s *sse) raw(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start()
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return nil
}

// fail reports an error: as the HTTP response while nothing was sent, as
// an error event once the stream has started (the status is gone by then).
func (s *sse) fail(e *apiError) {
	if e.Status == 499 {
		return // the client is gone
	}
	s.mu.Lock()
	started := s.started
	if !started {
		s.started = true // nothing else may write now
		writeError(s.w, e)
	}
	s.mu.Unlock()
	if !started {
		return
	}
	_ = s.send(map[string]*apiError{"error": e})
}

package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrBodyTimeout is what a request body's Read returns when the body did
// not arrive within its deadline (BodyDeadline).
var ErrBodyTimeout = errors.New("request body timeout")

// BodyDeadline wraps h so that a request with a body must deliver it
// within timeout of its headers: the connection's read deadline is set
// before h runs and cleared as soon as a Read of the body returns its end
// (or an error), so a response that streams for longer than timeout is not
// cut by it. A body that does not arrive in time makes its Read fail with
// ErrBodyTimeout, and the request is answered 408 Request Timeout with an
// error in the OpenAI shape, whatever h itself writes after the failed
// read; the connection is closed after it. A request without a body (a GET)
// is passed through untouched: net/http watches such a connection for the
// client hanging up from the start, and a deadline there would cancel the
// request.
func BodyDeadline(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
			h.ServeHTTP(w, r) // a writer without deadlines (a test's recorder)
			return
		}
		tw := &timeoutWriter{ResponseWriter: w, timeout: timeout}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, tw: tw}
		h.ServeHTTP(tw, r)
		tw.finish()
	})
}

// deadlineBody is a request body under a read deadline, which it clears
// when the body ends.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	tw   *timeoutWriter
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil {
		return n, nil
	}
	if isTimeout(err) {
		b.tw.timedOut()
		return n, fmt.Errorf("%w: the body did not arrive within %v (-timeout)", ErrBodyTimeout, b.tw.timeout)
	}
	// The body is read (or broken): from here on the connection is
	// watched for the client hanging up, which a deadline must not cut.
	b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
	return n, err
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// timeoutWriter answers 408 in place of the handler once the body timed
// out before the handler wrote anything.
type timeoutWriter struct {
	http.ResponseWriter
	timeout time.Duration

	mu       sync.Mutex
	wrote    bool // the handler's status went out
	expired  bool // the body timed out before it did
	answered bool // the 408 went out
}

// timedOut records that the body's deadline passed.
func (w *timeoutWriter) timedOut() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.wrote {
		w.expired = true
	}
}

// take reports whether the handler's write may go through, sending the
// 408 instead the first time it may not.
func (w *timeoutWriter) take() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.expired {
		w.wrote = true
		return true
	}
	w.answer()
	return false
}

// answer writes the 408 once; mu is held.
func (w *timeoutWriter) answer() {
	if w.answered {
		return
	}
	w.answered = true
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	e.Error.Message = fmt.Sprintf("the request body did not arrive within %v of its headers (-timeout)", w.timeout)
	e.Error.Type, e.Error.Code = "invalid_request_error", "request_timeout"
	b, _ := json.Marshal(e)
	h := w.ResponseWriter.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Connection", "close")
	w.ResponseWriter.WriteHeader(http.StatusRequestTimeout)
	w.ResponseWriter.Write(append(b, '\n'))
}

// finish sends the 408 if the body timed out and the handler wrote nothing.
func (w *timeoutWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.expired {
		w.answer()
	}
}

func (w *timeoutWriter) WriteHeader(code int) {
	if w.take() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *timeoutWriter) Write(b []byte) (int, error) {
	if w.take() {
		return w.ResponseWriter.Write(b)
	}
	return len(b), nil // the 408 went out instead
}

// Flush passes a flush on (handlers that stream assert http.Flusher).
func (w *timeoutWriter) Flush() {
	if w.take() {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *timeoutWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

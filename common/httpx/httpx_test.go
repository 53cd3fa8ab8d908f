package httpx

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveLimited serves h under l on a loopback port and returns its address.
func serveLimited(t *testing.T, l Limits, h http.Handler) string {
	t.Helper()
	require.NoError(t, l.Validate())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := l.Server(h)
	go srv.Serve(l.Listen(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// testHandler answers /health, reads a body as the servers' handlers do
// (a failed read is a 400 of its own), and on /stream sends events for
// three body deadlines after the body was read.
func testHandler(bodyTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "handler: "+err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path != "/stream" {
			fmt.Fprintf(w, "read %d bytes", len(body))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		end := time.Now().Add(3 * bodyTimeout)
		for i := 0; time.Now().Before(end) && i < 1000; i++ {
			select {
			case <-r.Context().Done():
				return // cut: the client sees no "done" event
			case <-time.After(bodyTimeout / 10):
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: done\n\n")
	})
}

// TestDribbledBodyIsCutWith408WhileHealthAnswers: a client sends its
// headers and a few bytes of a 100-byte body, then nothing. After the body
// deadline it gets a 408 naming -timeout, not the handler's own 400, and
// the connection is closed; /health answers all the while, and a whole
// body sent in time is read as usual.
func TestDribbledBodyIsCutWith408WhileHealthAnswers(t *testing.T) {
	l := DefaultLimits()
	l.BodyTimeout = 300 * time.Millisecond
	addr := serveLimited(t, l, testHandler(l.BodyTimeout))

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second))) // only to catch a hang
	_, err = fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
	require.NoError(t, err)

	resp, err := http.Get("http://" + addr + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "/health answers while a body dribbles")

	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "the dribbling client got no answer")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"code":"request_timeout"`)
	assert.Contains(t, string(b), "-timeout")
	assert.NotContains(t, string(b), "handler:", "the handler's own error is replaced by the 408")
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "the connection is closed after the 408")

	resp, err = http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi"}`))
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "read 15 bytes", string(b))
}

// TestStreamOutlivesTheBodyDeadline: a response streamed for three times
// the body deadline after its body was read is not cut (a read deadline
// left armed once the body is read would fire in net/http's watch for the
// client hanging up and cancel the request), and the connection serves the
// next request afterwards.
func TestStreamOutlivesTheBodyDeadline(t *testing.T) {
	l := DefaultLimits()
	l.BodyTimeout = 300 * time.Millisecond
	addr := serveLimited(t, l, testHandler(l.BodyTimeout))
	client := &http.Client{Timeout: 20 * time.Second} // only to catch a hang

	for range 2 { // the second request reuses the connection
		resp, err := client.Post("http://"+addr+"/stream", "application/json", strings.NewReader(`{"prompt":"hi","stream":true}`))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.True(t, strings.HasSuffix(string(b), "data: done\n\n"), "the stream was cut: %q", b)
	}
}

// TestConnectionCapRefusesWith503: with -max-conns 2 and two connections
// open, a third is answered 503 too_many_connections and closed; once one
// of the two closes, a new connection is served again.
func TestConnectionCapRefusesWith503(t *testing.T) {
	l := DefaultLimits()
	l.MaxConns = 2
	addr := serveLimited(t, l, testHandler(l.BodyTimeout))

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		held = append(held, c)
	}
	// Both are served (a request on each proves they were accepted), and
	// stay open (keep-alive).
	for _, c := range held {
		require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
		fmt.Fprint(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}

	resp, err := http.Get("http://" + addr + "/health")
	require.NoError(t, err, "an over-cap connection must get an answer")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(b), `"code":"too_many_connections"`)
	assert.Contains(t, string(b), "2 connections")

	held[0].Close()
	ok := false
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		if resp, err := c.Get("http://" + addr + "/health"); err == nil {
			ok = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	assert.True(t, ok, "a connection closed gives its slot back")
}

// TestLimitsValidateNamesTheFlag: a limit that could not work is refused
// with the flag's name.
func TestLimitsValidateNamesTheFlag(t *testing.T) {
	for flag, l := range map[string]Limits{
		"-header-timeout": {BodyTimeout: 1, IdleTimeout: 1},
		"-timeout":        {HeaderTimeout: 1, IdleTimeout: 1},
		"-idle-timeout":   {HeaderTimeout: 1, BodyTimeout: 1},
		"-max-conns":      {HeaderTimeout: 1, BodyTimeout: 1, IdleTimeout: 1, MaxConns: -1},
	} {
		err := l.Validate()
		require.Error(t, err, flag)
		assert.Contains(t, err.Error(), flag+" must be")
	}
	assert.NoError(t, DefaultLimits().Validate())
}

package cli

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

// TestServeCutsADribbledBodyButNotAStream runs serve with -timeout 300ms.
// A client that sends its headers and part of its body, then nothing, is
// answered 408 after the deadline while /health keeps answering; a
// streamed completion read slowly, event by event, for longer than the
// deadline is not cut.
func TestServeCutsADribbledBodyButNotAStream(t *testing.T) {
	const deadline = 300 * time.Millisecond
	url, _, _, log := startServe(t, Variant{Name: "testlimits"}, "-model", smallModel(t, "llama"), "-timeout", deadline.String())
	addr := strings.TrimPrefix(url, "http://")

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second))) // only to catch a hang
	_, err = fmt.Fprint(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"prompt\": [1, 2")
	require.NoError(t, err)
	resp, err := testClient.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "/health answers while a body dribbles")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "the dribbling client got no answer\n%s", log)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(b))
	assert.Contains(t, string(b), `"code":"request_timeout"`)

	client := &http.Client{Timeout: 60 * time.Second} // only to catch a hang
	resp, err = client.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": [1, 2, 3], "max_tokens": 8, "temperature": 0, "ignore_eos": true, "stream": true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	start := time.Now()
	br := bufio.NewReader(resp.Body)
	events, done := 0, false
	for range 100 {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		events++
		if strings.TrimSpace(line) == "data: [DONE]" {
			done = true
			break
		}
		time.Sleep(deadline / 4) // a slow reader: the stream lasts past the deadline
	}
	assert.True(t, done, "the stream was cut after %d events", events)
	assert.Greater(t, time.Since(start), deadline, "the stream must outlast the body deadline for the test to mean anything")
}

// TestServeRefusesConnectionsOverMaxConns: with -max-conns 2 and two
// keep-alive connections open, a third is answered 503 and closed.
func TestServeRefusesConnectionsOverMaxConns(t *testing.T) {
	url, _, _, _ := startServe(t, Variant{Name: "testlimits"}, "-model", smallModel(t, "llama"), "-max-conns", "2")
	addr := strings.TrimPrefix(url, "http://")
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		fmt.Fprint(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	resp, err := testClient.Get(url + "/health")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(b), `"code":"too_many_connections"`)
}

// TestServeRefusesBadLimits: a limit that could not work stops serve
// before it starts, naming the flag.
func TestServeRefusesBadLimits(t *testing.T) {
	for _, args := range [][]string{{"-timeout", "0s"}, {"-idle-timeout", "-1s"}, {"-max-conns", "-1"}, {"-header-timeout", "0s"}} {
		err := Serve(t.Context(), Variant{Name: "testlimits"}, append([]string{"-port", "0"}, args...), nil, io.Discard)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), args[0]+" must be", args)
	}
}

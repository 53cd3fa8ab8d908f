package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// startRouterServe runs the serve command with args in front of the given
// replicas and returns its URL.
func startRouterServe(t *testing.T, replicas []string, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, model.WriteSynthetic(dir, modeltest.Options(model.ArchLlama, 5)))
	ctx, cancel := context.WithCancel(t.Context())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	var log bytes.Buffer
	all := []string{"-port=0", "-policy=round-robin", "-model=" + dir}
	for _, u := range replicas {
		all = append(all, "-replica="+u)
	}
	go func() { done <- serve(ctx, append(all, args...), func(s string) { addr <- s }, &log) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case s := <-addr:
		return "http://" + s
	case err := <-done:
		done <- err
		t.Fatalf("serve returned before listening: %v\n%s", err, log.String())
	case <-time.After(time.Minute):
		t.Fatal("serve did not start")
	}
	return ""
}

// TestServeAppliesLimitsAndResilienceFlags: the router's serve takes the
// client-side limits (-timeout: a dribbled body gets 408 while /health
// answers) and the replica-side ones (-eject-after 1: one 500 ejects the
// failing replica, and the request is retried on the other).
func TestServeAppliesLimitsAndResilienceFlags(t *testing.T) {
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(bad.Close)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[],"usage":{"prompt_tokens":3}}`))
	}))
	t.Cleanup(good.Close)
	url := startRouterServe(t, []string{bad.URL, good.URL}, "-timeout=300ms", "-eject-after=1", "-eject-time=1h", "-max-eject-time=1h")

	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second))) // only to catch a hang
	fmt.Fprint(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"prompt\":")
	resp, err := testClient.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, string(b))

	for range 3 {
		resp, err := testClient.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":[1,2,3]}`))
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	resp, err = testClient.Get(url + "/metrics")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(page), `kvlab_router:ejections_total{replica="0"} 1`)
	assert.Contains(t, string(page), `kvlab_router:replica_failures_total{reason="status_5xx",replica="0"} 1`)
}

// TestServeRefusesBadResilienceFlags: each names its flag.
func TestServeRefusesBadResilienceFlags(t *testing.T) {
	for _, arg := range []string{"-replica-connect-timeout=0s", "-replica-response-timeout=-1s", "-replica-idle-timeout=0s", "-retries=-1",
		"-eject-after=-1", "-eject-time=0s", "-max-eject-time=1s", "-max-eject-percent=0", "-max-eject-percent=101", "-timeout=0s", "-max-conns=-1"} {
		err := serve(t.Context(), []string{"-port=0", "-replica=http://127.0.0.1:1", arg}, nil, io.Discard)
		require.Error(t, err, arg)
		assert.Contains(t, err.Error(), strings.SplitN(arg, "=", 2)[0]+" must", arg)
	}
}

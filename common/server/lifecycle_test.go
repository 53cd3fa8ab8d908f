package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// TestClientDisconnectCancelsTheRequest reads one token of a long stream,
// hangs up, and checks that the engine stops working for nobody: the
// request is cancelled, its blocks go back, and the server goes on.
func TestClientDisconnectCancelsTheRequest(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	cfg.MaxContext = 2048 // the whole pool: long enough that the request is still running when the client hangs up
	ts := startServer(t, tm, cfg, Options{})
	ctx, hangUp := context.WithCancel(context.Background())
	body := `{"prompt": [5, 6, 7, 8, 9, 10], "max_tokens": 2000, "temperature": 0, "ignore_eos": true, "stream": true}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "data: "), line)
	hangUp()
	resp.Body.Close()

	eventually(t, func() bool { return ts.es.Snapshot().Stats.Cancelled == 1 }, "the engine to cancel the request")
	eventually(t, func() bool { s := ts.es.Snapshot(); return s.Running == 0 && s.Waiting == 0 }, "the engine to go idle")
	s := ts.es.Snapshot()
	assert.Less(t, s.Stats.DecodeTokens, 1999, "decoding stopped early")
	assert.Equal(t, s.TotalBlocks-s.FreeBlocks, s.CacheBlocks, "only the prefix cache holds blocks")

	status, _ := post(t, ts.url+"/v1/completions", `{"prompt": [1, 2], "max_tokens": 2}`)
	assert.Equal(t, http.StatusOK, status)
}

// TestConcurrentStreamingClients is the load test: 64 clients streaming a
// few requests each over loopback. Every response must be complete and
// equal to the engine's tokens alone, no goroutine may be left behind, and
// the pool must be clean.
func TestConcurrentStreamingClients(t *testing.T) {
	const clients, each, maxTokens = 64, 3, 8
	tm := loadTestModel(t)
	// Eight distinct prompts sharing a prefix, so the cache is exercised.
	prefix := prompt(24, 8)
	var reqs []engine.Request
	for i := range 8 {
		reqs = append(reqs, engine.Request{ID: i, Prompt: append(slices.Clone(prefix), prompt(5+i, int32(20+i))...), MaxTokens: maxTokens, IgnoreEOS: true})
	}
	want := reference(t, tm, reqs...)

	before := runtime.NumGoroutine()
	ts := startServer(t, tm, engineConfig(true), Options{})
	client := &http.Client{Timeout: 60 * time.Second}
	var (
		mu    sync.Mutex
		ttfts []time.Duration
		wg    sync.WaitGroup
	)
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				r := reqs[(c+k)%len(reqs)]
				body := mustJSON(map[string]any{"prompt": r.Prompt, "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true, "return_token_ids": true, "stream": true})
				sent := time.Now()
				resp, err := client.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(body))
				if !assert.NoError(t, err) {
					return
				}
				tokens, first, err := readTokens(resp.Body, sent)
				resp.Body.Close()
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, want[r.ID].Tokens, tokens, "client %d request %d", c, k)
				mu.Lock()
				ttfts = append(ttfts, first)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	require.Len(t, ttfts, clients*each)
	slices.Sort(ttfts)
	t.Logf("%d streaming requests from %d clients in %v; TTFT at the client p50 %v, p99 %v",
		len(ttfts), clients, wall.Round(time.Millisecond), ttfts[len(ttfts)/2].Round(time.Microsecond), ttfts[len(ttfts)*99/100].Round(time.Microsecond))

	status, _ := post(t, ts.url+"/health", "")
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	resp, err := testClient.Get(ts.url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	ts.stop()
	client.CloseIdleConnections()
	testClient.CloseIdleConnections()
	eventually(t, func() bool { return runtime.NumGoroutine() <= before }, fmt.Sprintf("goroutines to return to %d", before))
}

// readTokens reads a completions stream and returns its token ids and the
// time from sent to the first one.
func readTokens(r io.Reader, sent time.Time) ([]int32, time.Duration, error) {
	var tokens []int32
	var first time.Duration
	done := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			done = true
			break
		}
		var c completionResponse
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, 0, err
		}
		for _, ch := range c.Choices {
			if first == 0 && len(ch.TokenIDs) > 0 {
				first = time.Since(sent)
			}
			tokens = append(tokens, ch.TokenIDs...)
		}
	}
	if !done {
		return tokens, first, fmt.Errorf("stream ended without [DONE] (%v)", sc.Err())
	}
	return tokens, first, nil
}

package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// These tests drive the server through its wire, as hostile clients do:
// raw sockets on loopback, a client that never reads, one that hangs up,
// requests that do not fit, and the outcome counters a dashboard reads.

// smallSendBuffers makes the server's side of every connection hold little
// unsent data, so that a client that does not read blocks the server's
// writes after a few kilobytes rather than after the megabytes Linux's
// loopback autotuning allows.
func smallSendBuffers(ln net.Listener) net.Listener { return sendBufListener{ln} }

type sendBufListener struct{ net.Listener }

func (l sendBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// rawPost sends a POST with a JSON body on a fresh TCP connection whose
// receive buffer is small, and returns the connection unread.
func rawPost(t *testing.T, url, path, body string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	tc := c.(*net.TCPConn)
	require.NoError(t, tc.SetReadBuffer(4096))
	_, err = fmt.Fprintf(tc, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	require.NoError(t, err)
	return tc
}

// metric returns the value of one series (name with its labels, as
// /metrics prints it) from the server's metrics; 0 if absent.
func metric(t testing.TB, url, series string) float64 {
	t.Helper()
	resp, err := testClient.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// outcomes reads every request outcome counter.
func outcomes(t testing.TB, url string) map[string]float64 {
	out := map[string]float64{}
	for _, r := range []string{"stop", "length", "abort"} {
		out[r] = metric(t, url, `kvlab:request_success_total{finished_reason="`+r+`"}`)
	}
	for _, r := range []string{"error", "rejected"} {
		out[r] = metric(t, url, `kvlab:request_failure_total{reason="`+r+`"}`)
	}
	return out
}

// TestSlowReaderNeverStallsTheEngine is the stall a client that stops
// reading used to cause: it asks for a long stream of 8 samples and reads
// nothing. The server's writes block once the socket buffers fill; the
// engine's loop must not. Once the unread events pass the budget the loop
// cancels the request itself, and three small requests sent after that
// are served within a few engine steps. When the client finally reads, it
// gets a well-formed stream that ends in finish_reason "abort" and [DONE].
func TestSlowReaderNeverStallsTheEngine(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	cfg.MaxContext = 2048 // the whole pool: 8 samples × up to 2000 tokens
	const budget = 256
	ts := startServerWith(t, tm, cfg, engine.Limits{MaxUnread: budget}, Options{}, smallSendBuffers)

	slow := rawPost(t, ts.url, "/v1/completions", `{"prompt": [5, 6, 7, 8], "n": 8, "max_tokens": 2000, "ignore_eos": true, "stream": true}`)
	defer slow.Close()
	eventually(t, func() bool { return ts.es.Snapshot().TooSlow == 1 }, "the loop to cancel the request of the client that does not read")

	steps := ts.es.Snapshot().Stats.Steps
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A stalled engine would never answer: the client gives up
			// and the test fails, rather than hanging.
			client := &http.Client{Timeout: 20 * time.Second}
			resp, err := client.Post(ts.url+"/v1/completions", "application/json",
				strings.NewReader(fmt.Sprintf(`{"prompt": [%d, 2, 3], "max_tokens": 4, "ignore_eos": true}`, 10+i)))
			if !assert.NoError(t, err, "small request %d", i) {
				return
			}
			defer resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}()
	}
	wg.Wait()
	// Three prompts of 3 tokens and 4 tokens each: a prefill step and
	// three decode steps if they run together, twelve one after another.
	assert.LessOrEqual(t, ts.es.Snapshot().Stats.Steps-steps, 16, "engine steps the three small requests took")

	// The slow client reads at last: the stream is whole and says why it
	// ended.
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := events(t, resp.Body) // the whole body, checked event by event
	resp.Body.Close()
	text := strings.Join(evs, "\n")
	assert.Equal(t, 8, strings.Count(text, `"finish_reason":"abort"`), "every sample ends in abort")
	assert.Equal(t, "[DONE]", evs[len(evs)-1], "the stream ends with [DONE]")
	assert.Less(t, len(evs), 8*2000, "the request was cut, not finished")

	eventually(t, func() bool {
		o := outcomes(t, ts.url)
		return o["abort"] == 1 && o["length"] == 3
	}, "one abort and three length outcomes")
	assert.Equal(t, 1.0, metric(t, ts.url, "kvlab:requests_too_slow_total"))
	s := ts.es.Snapshot()
	assert.Equal(t, s.TotalBlocks-s.FreeBlocks, s.CacheBlocks, "only the prefix cache holds blocks")
}

// TestWritesHaveADeadline: a client that stops reading a stream is given
// up when one write to it has not gone through within WriteTimeout, even
// if its request has not outrun the unread budget: the handler returns,
// the request is cancelled and counted as an abort.
func TestWritesHaveADeadline(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(true)
	cfg.MaxContext = 2048
	ts := startServerWith(t, tm, cfg, engine.Limits{MaxUnread: 1 << 20}, Options{WriteTimeout: 200e6}, smallSendBuffers)

	slow := rawPost(t, ts.url, "/v1/completions", `{"prompt": [5, 6, 7, 8], "n": 8, "max_tokens": 2000, "ignore_eos": true, "stream": true}`)
	defer slow.Close()
	eventually(t, func() bool { return outcomes(t, ts.url)["abort"] == 1 }, "the handler to give up on the client")
	eventually(t, func() bool { s := ts.es.Snapshot(); return s.Running == 0 && s.Waiting == 0 }, "the engine to drop the request")
	assert.Zero(t, ts.es.Snapshot().TooSlow, "the write deadline ended it, not the budget")
	assert.Less(t, ts.es.Snapshot().Stats.DecodeTokens, 8*1999, "decoding stopped early")
}

// TestContextIsWhatThePoolHolds: /v1/models reports the context one
// sequence can really hold (here the pool's 16 blocks of 4 tokens, not the
// 256 of -max-context); an explicit max_tokens that does not fit is a 400
// before anything runs; a chat without max_tokens runs to the limit and
// ends with finish_reason "length" and [DONE].
func TestContextIsWhatThePoolHolds(t *testing.T) {
	tm := loadTestModel(t)
	cfg := engineConfig(false)
	cfg.NumBlocks = 16
	ts := startServer(t, tm, cfg, Options{})

	_, body := getBody(t, ts.url+"/v1/models")
	assert.Contains(t, string(body), `"max_model_len":64`)

	status, body := post(t, ts.url+"/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 1000000000, "ignore_eos": true}`)
	assert.Equal(t, http.StatusBadRequest, status)
	e := decodeError(t, body)
	assert.Equal(t, "context_length_exceeded", e.Code)
	assert.Equal(t, "max_tokens", e.Param)
	assert.Contains(t, e.Message, "maximum context length is 64 tokens")
	assert.Contains(t, e.Message, "you requested 1000000003 tokens (3 in the prompt, 1000000000 for the completion)")

	evs := stream(t, ts.url+"/v1/chat/completions", map[string]any{
		"messages": []map[string]string{{"role": "user", "content": "hi"}}, "ignore_eos": true, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}})
	require.NotEmpty(t, evs)
	assert.Equal(t, "[DONE]", evs[len(evs)-1])
	var finish, usage string
	for _, ev := range evs {
		if strings.Contains(ev, `"finish_reason":"`) {
			finish = ev
		}
		if strings.Contains(ev, `"usage":{`) {
			usage = ev
		}
	}
	assert.Contains(t, finish, `"finish_reason":"length"`)
	assert.Contains(t, usage, `"total_tokens":64`, "prompt and completion fill the context")

	// /completion without n_predict also stops at the limit, with
	// llama-server's stop_type "limit".
	status, body = post(t, ts.url+"/completion", `{"prompt": [1, 2, 3], "ignore_eos": true}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, string(body), `"stop_type":"limit"`)
	assert.Contains(t, string(body), `"tokens_predicted":61`)
}

// TestEveryRequestEndsInOneOutcome sends one request of each kind and
// checks that the outcome counters add up to the number sent, each in
// its place.
func TestEveryRequestEndsInOneOutcome(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(true), Options{StrictModelName: true}) // so that "gpt-9" is refused
	sent := map[string]int{}
	send := func(want, path, body string) {
		t.Helper()
		sent[want]++
		_, _ = post(t, ts.url+path, body)
	}
	send("length", "/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 3, "ignore_eos": true}`)
	send("length", "/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 3, "ignore_eos": true, "n": 3, "stream": true}`)
	send("length", "/completion", `{"prompt": [4, 5], "n_predict": 2, "ignore_eos": true}`)
	prompt, stop, probes := stopCase(t, ts.url)
	sent["length"] += probes
	stopJSON, err := json.Marshal(stop)
	require.NoError(t, err)
	send("stop", "/v1/completions", fmt.Sprintf(`{"prompt": %s, "max_tokens": 50, "stop": [%s], "temperature": 0, "ignore_eos": true}`, prompt, stopJSON))
	send("rejected", "/v1/completions", `{"prompt": [1, 2`)
	send("rejected", "/v1/completions", `[1, 2]`)
	send("rejected", "/v1/completions", `{"prompt": [1, 2.5, 5]}`)
	send("rejected", "/v1/completions", `{"prompt": [1], "n": 17}`)
	send("rejected", "/v1/chat/completions", `{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}`)
	send("rejected", "/v1/completions", `{"prompt": [1, 2], "max_tokens": 100000}`)

	// A client that hangs up mid-stream.
	sent["abort"]++
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions",
		strings.NewReader(`{"prompt": [9, 9, 9], "max_tokens": 200, "ignore_eos": true, "stream": true}`))
	require.NoError(t, err)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	hangUp()
	resp.Body.Close()

	total := 0
	for _, n := range sent {
		total += n
	}
	eventually(t, func() bool {
		sum := 0.0
		for _, v := range outcomes(t, ts.url) {
			sum += v
		}
		return sum == float64(total)
	}, "the outcomes to add up to the requests sent")
	have := outcomes(t, ts.url)
	for _, r := range []string{"stop", "length", "abort", "error", "rejected"} {
		assert.Equal(t, float64(sent[r]), have[r], "outcome %s", r)
	}
}

// stopCase finds a prompt whose greedy continuation's first three tokens
// make some text, and returns it with that text as a stop string (so a
// longer greedy run of it ends in "stop"), and how many probe requests it
// sent (each ends in "length").
func stopCase(t *testing.T, url string) (prompt, stop string, probes int) {
	t.Helper()
	for i := 1; i < 50; i++ {
		prompt = fmt.Sprintf("[%d, 2, 3]", i)
		status, body := post(t, url+"/v1/completions", `{"prompt": `+prompt+`, "max_tokens": 3, "temperature": 0, "ignore_eos": true}`)
		probes++
		require.Equal(t, http.StatusOK, status)
		var r struct {
			Choices []struct{ Text string }
		}
		require.NoError(t, json.Unmarshal(body, &r))
		if text := strings.TrimRight(r.Choices[0].Text, "\uFFFD"); text != "" {
			return prompt, text, probes
		}
	}
	t.Fatal("no prompt gave text in three tokens")
	return
}

// getBody sends a GET and returns the status and the body.
func getBody(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := testClient.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, bytes.TrimSpace(b)
}

package server

import (
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
)

// nested is a prompt of depth one-element arrays around the token id 1.
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// TestPromptNestingIsBounded sends prompts nested deeper than any API's
// shapes, among them the 9,990-deep one that cost 8 s of CPU before it was
// served, and one past encoding/json's own limit of 10,000: each is a 400
// that names the prompt, on both completion endpoints, as /tokenize's
// content nested too deep is. Every shape the APIs define is still served,
// and brackets inside strings or in fields nobody reads count for nothing.
func TestPromptNestingIsBounded(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	refused := map[string]string{
		"three levels":           `{"prompt": ` + nested(3) + `}`,
		"9,990 levels":           `{"prompt": ` + nested(9990) + `}`,
		"10,000 levels":          `{"prompt": ` + nested(10000) + `}`,
		"a field named in caps":  `{"PROMPT": ` + nested(10000) + `}`,
		"after a bracket string": `{"stop": "[[[[[", "prompt": [[["a"]]]}`,
		"an object at level 3":   `{"prompt": [[{"a": 1}]]}`,
	}
	for _, path := range []string{"/v1/completions", "/completion"} {
		for name, body := range refused {
			t.Run(path+" "+name, func(t *testing.T) {
				status, raw := post(t, ts.url+path, body)
				require.Equal(t, http.StatusBadRequest, status, "%.200s", raw)
				e := decodeError(t, raw)
				assert.Equal(t, "prompt", e.Param)
				assert.Equal(t, "too_deep", e.Code)
				assert.Contains(t, e.Message, "prompt nests arrays more than 2 deep")
			})
		}
	}
	status, raw := post(t, ts.url+"/tokenize", `{"content": [["a"]]}`)
	require.Equal(t, http.StatusBadRequest, status, string(raw))
	assert.Equal(t, "content", decodeError(t, raw).Param)

	served := map[string][]string{
		"/v1/completions": {`"hi"`, `[1, 2]`, `["hi"]`, `[[1, 2]]`, `"[[[[x"`},
		"/completion":     {`"hi"`, `[1, 2]`, `["hi", 3]`, `[[1, 2], "x"]`, `[["a", 1]]`, `"[[[[x"`},
	}
	for path, prompts := range served {
		for _, p := range prompts {
			body := `{"prompt": ` + p + `, "max_tokens": 1, "n_predict": 1, "tools": [[[[[{"deep": [[[]]]}]]]]]}`
			status, raw := post(t, ts.url+path, body)
			assert.Equal(t, http.StatusOK, status, "%s %s: %s", path, p, raw)
		}
	}
}

// largestWrite records the largest single write of any connection the
// server accepts.
type largestWrite struct {
	net.Listener
	most atomic.Int64
}

func (l *largestWrite) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &writeSizes{Conn: c, l: l}, nil
}

type writeSizes struct {
	net.Conn
	l *largestWrite
}

func (c *writeSizes) Write(b []byte) (int, error) {
	for {
		most := c.l.most.Load()
		if int64(len(b)) <= most || c.l.most.CompareAndSwap(most, int64(len(b))) {
			break
		}
	}
	return c.Conn.Write(b)
}

// TestTextAnswersAreWrittenAsTheyAreMade asks /tokenize for the pieces of
// a text and /detokenize for the text of random ids, each answer over a
// half a MiB, and watches the server's socket: no write is larger than the 64 KiB
// buffer (and its chunk's framing), where an answer built whole went out
// in one write as large as itself. The bytes are those of the answer built
// whole, invalid UTF-8 replaced as before across the buffer's boundaries.
func TestTextAnswersAreWrittenAsTheyAreMade(t *testing.T) {
	tm := loadTestModel(t)
	var lw *largestWrite
	ts := startServerWith(t, tm, engineConfig(false), engine.Limits{}, Options{}, func(l net.Listener) net.Listener {
		lw = &largestWrite{Listener: l}
		return lw
	})
	const most = textBuffer + 64

	text := strings.Repeat("the shared prefix héllo, ", 4000) + "€"
	status, body := post(t, ts.url+"/tokenize", map[string]any{"content": text, "with_pieces": true})
	require.Equal(t, http.StatusOK, status, "%.200s", body)
	type withPiece struct {
		ID    int32 `json:"id"`
		Piece any   `json:"piece"`
	}
	var want []withPiece
	for _, id := range tm.tok.Encode(text) {
		b := tm.tok.Piece(id)
		want = append(want, withPiece{ID: id, Piece: string(b)})
		if !utf8.Valid(b) {
			nums := make([]int, len(b))
			for j, c := range b {
				nums[j] = int(c)
			}
			want[len(want)-1].Piece = nums
		}
	}
	wantBody, err := json.Marshal(map[string]any{"tokens": want})
	require.NoError(t, err)
	require.Greater(t, len(body), 8*textBuffer, "the answer must dwarf the buffer")
	assert.Equal(t, string(wantBody)+"\n", string(body))
	assert.LessOrEqual(t, lw.most.Load(), int64(most), "/tokenize wrote its answer whole")

	lw.most.Store(0)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, 300000)
	for i := range ids {
		ids[i] = int32(rng.IntN(tm.m.Config.VocabSize))
	}
	require.Contains(t, ts.h.piecesText(ids), "\uFFFD", "the ids must make invalid UTF-8 too")
	status, body = post(t, ts.url+"/detokenize", map[string]any{"tokens": ids})
	require.Equal(t, http.StatusOK, status, "%.200s", body)
	wantBody, err = json.Marshal(map[string]string{"content": ts.h.piecesText(ids)})
	require.NoError(t, err)
	require.Greater(t, len(body), 8*textBuffer, "the answer must dwarf the buffer")
	assert.Equal(t, string(wantBody)+"\n", string(body))
	assert.LessOrEqual(t, lw.most.Load(), int64(most), "/detokenize wrote its answer whole")
}

// TestTextRequestsPastTheBoundAre503 holds one /tokenize inside the server
// with -max-text-requests 1: the next /tokenize and /detokenize are refused
// at once with 503, Retry-After and a message naming the flag, and counted;
// once the first is done, the next is served.
func TestTextRequestsPastTheBoundAre503(t *testing.T) {
	tm := loadTestModel(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	hooks := &testHooks{text: func() {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	}}
	ts := startServer(t, tm, engineConfig(false), Options{MaxTextRequests: 1, hooks: hooks})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	held := make(chan int, 1)
	go func() { // not post: a goroutine other than the test's may not fail it
		resp, err := testClient.Post(ts.url+"/tokenize", "application/json", strings.NewReader(`{"content": "held"}`))
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	<-entered
	for _, req := range []struct{ path, body string }{{"/tokenize", `{"content": "hello"}`}, {"/detokenize", `{"tokens": [1, 2]}`}} {
		resp, err := testClient.Post(ts.url+req.path, "application/json", strings.NewReader(req.body))
		require.NoError(t, err)
		var e struct{ Error apiError }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, req.path)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Equal(t, "server_busy", e.Error.Code)
		assert.Contains(t, e.Error.Message, "already serving 1 /tokenize and /detokenize requests (--max-text-requests)")
	}
	assert.Equal(t, 2.0, metric(t, ts.url, "kvlab:text_requests_refused_total"))

	releaseOnce.Do(func() { close(release) })
	assert.Equal(t, http.StatusOK, <-held)
	status, body := post(t, ts.url+"/tokenize", `{"content": "hello"}`)
	assert.Equal(t, http.StatusOK, status, string(body))
}

// TestAStalledTextReaderHoldsItsPlaceOnlyUntilTheWriteDeadline asks for a
// /tokenize answer of megabytes on a socket it never reads, under
// -max-text-requests 1: the server's writes block once the socket buffers
// fill, and the write deadline gives the client up and its place back, so
// the next /tokenize is served instead of refused forever. The deadline is
// 2 s, not less: the place is held only that long after the writes block,
// and the probes must see it held on a busy machine too (at 200 ms, CI's
// parallel packages once kept every probe out of that window).
func TestAStalledTextReaderHoldsItsPlaceOnlyUntilTheWriteDeadline(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServerWith(t, tm, engineConfig(false), engine.Limits{}, Options{MaxTextRequests: 1, WriteTimeout: 2 * time.Second}, smallSendBuffers)
	body, err := json.Marshal(map[string]any{"content": strings.Repeat("the shared prefix héllo, ", 4000), "with_pieces": true})
	require.NoError(t, err)
	stalled := rawPost(t, ts.url, "/tokenize", string(body))
	defer stalled.Close()
	probe := func() int {
		status, _ := post(t, ts.url+"/tokenize", `{"content": "hello"}`)
		return status
	}
	eventually(t, func() bool { return probe() == http.StatusServiceUnavailable }, "the stalled reader to hold the place")
	eventually(t, func() bool { return probe() == http.StatusOK }, "the stalled reader's place to be given back")
}

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"kvlab/common/workload"
)

// httpEngine is workload.Engine over HTTP: the engine is a server speaking
// the OpenAI completions API (with vLLM's return_token_ids and ignore_eos),
// and this is its client, measured the way a user would see it.
//
// Submit starts one streaming POST /v1/completions on its own goroutine and
// returns at once, so arrivals never wait for the server (open loop). The
// goroutine reads the server-sent events and stamps each chunk with the time
// its data line was read; every token of the chunk carries that stamp
// (workload.Token.At), so TTFT and ITL are the client's view of the stream,
// independent of when the driver collects the events. Run waits on the
// engine (workload.Waiter) rather than stepping it.
//
// A request fails, with the server's message where there is one, when the
// server answers with an error status, sends an error event, breaks the
// stream before `data: [DONE]`, or exceeds the request timeout.
type httpEngine struct {
	*workload.Remote
	base    string // the server's URL, without a trailing slash
	model   string // sent as "model"; empty leaves the field out
	client  *http.Client
	timeout time.Duration // per request, headers to [DONE]
}

// newHTTPEngine returns a client of the server at base. timeout bounds each
// request (0: none); cancelling parent aborts every stream.
func newHTTPEngine(parent context.Context, base, model string, timeout time.Duration) *httpEngine {
	return &httpEngine{
		Remote:  workload.NewRemote(parent),
		base:    strings.TrimRight(base, "/"),
		model:   model,
		client:  &http.Client{Transport: newHTTPTransport()},
		timeout: timeout,
	}
}

// newHTTPTransport is a transport for many concurrent streams to one host:
// a connection per stream, kept for reuse, and no compression, which would
// buffer the events.
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // the servers measured are local; a proxy would be measured too
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model         string        `json:"model,omitempty"`
	Prompt        []int32       `json:"prompt"`
	MaxTokens     int           `json:"max_tokens"`
	Temperature   float64       `json:"temperature"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	// IgnoreEOS makes the server generate exactly MaxTokens, as the
	// in-process benchmark does.
	IgnoreEOS      bool `json:"ignore_eos"`
	ReturnTokenIDs bool `json:"return_token_ids"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionChunk is one streamed event: a content chunk (one choice), the
// usage chunk (no choices), or an error reported after the stream started.
type completionChunk struct {
	Choices []struct {
		Index        int     `json:"index"`
		TokenIDs     []int32 `json:"token_ids"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *apiErrorBody `json:"error"`
}

// apiErrorBody is the OpenAI error object.
type apiErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

// Submit starts the request's stream and returns; failures arrive later
// as the request's error event.
func (e *httpEngine) Submit(id int, prompt []int32, maxTokens int) error {
	body, err := json.Marshal(completionRequest{
		Model: e.model, Prompt: prompt, MaxTokens: maxTokens, Temperature: 0,
		Stream: true, StreamOptions: streamOptions{IncludeUsage: true},
		IgnoreEOS: true, ReturnTokenIDs: true,
	})
	if err != nil {
		return err
	}
	e.Start(func(ctx context.Context) { e.stream(ctx, id, body) })
	return nil
}

// Close aborts the streams still open and waits for their goroutines.
func (e *httpEngine) Close() {
	e.Remote.Close()
	e.client.CloseIdleConnections()
}

// stream runs one request to its end and queues its events: one per token,
// then either the last token marked Done or an error event.
func (e *httpEngine) stream(ctx context.Context, id int, body []byte) {
	cancel := context.CancelFunc(func() {})
	if e.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
	}
	defer cancel()
	s := &sseReader{id: id}
	err := s.run(ctx, e, body)
	if err != nil && ctx.Err() != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("no [DONE] within the request timeout (%v) after %d tokens", e.timeout, s.tokens)
		case e.Aborted():
			err = fmt.Errorf("aborted after %d tokens", s.tokens)
		}
	}
	if err != nil {
		// Tokens read before the failure still count as output.
		evs := append(append(s.released, s.held...), workload.Token{ID: id, Err: err, At: time.Now()})
		e.Push(evs...)
		return
	}
	e.SetCached(id, s.cached)
	s.held[len(s.held)-1].Done = true
	e.Push(append(s.released, s.held...)...)
}

// sseReader is the state of one request's stream.
type sseReader struct {
	id int
	// held are the latest chunk's tokens, kept until the stream shows
	// whether they were the last (Done); released are earlier tokens to
	// hand to Run after the current event.
	held, released []workload.Token
	tokens         int  // tokens read
	finished       bool // a choice carried a finish_reason
	cached         int
}

// run posts the request and reads its stream up to `data: [DONE]`. It
// returns nil only for a complete stream, with the last chunk's tokens
// still held.
func (s *sseReader) run(ctx context.Context, e *httpEngine, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("want a text/event-stream response, got %q", ct)
	}

	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var data []byte  // the current event's data lines, joined by \n
	var at time.Time // when the current event's first data line was read
	for {
		line, err := r.ReadBytes('\n')
		now := time.Now()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("stream broken after %d tokens, before [DONE]: %w", s.tokens, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			// A field line; only data matters here (comments start with
			// ':', and event, id and retry are not used by this API).
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				v = bytes.TrimPrefix(v, []byte(" "))
				if data != nil {
					data = append(data, '\n')
				} else {
					at = now
				}
				data = append(data, v...)
				if data == nil {
					data = []byte{} // an empty data line still makes an event
				}
			}
			continue
		}
		if data == nil {
			continue // a blank line ends an event; there was none
		}
		done, err := s.event(data, at)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		e.Push(s.released...)
		s.released = s.released[:0]
		data = nil
	}
}

// event handles one event's data, stamped at. It reports whether it was
// the final `[DONE]`.
func (s *sseReader) event(data []byte, at time.Time) (bool, error) {
	if string(data) == "[DONE]" {
		switch {
		case !s.finished:
			return false, fmt.Errorf("[DONE] without a finish_reason after %d tokens", s.tokens)
		case len(s.held) == 0:
			return false, errors.New("the stream finished without a token")
		}
		return true, nil
	}
	var c completionChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return false, fmt.Errorf("bad event after %d tokens: %w", s.tokens, err)
	}
	if c.Error != nil {
		return false, fmt.Errorf("server error after %d tokens: %s", s.tokens, c.Error.Message)
	}
	if c.Usage != nil && c.Usage.PromptTokensDetails != nil {
		s.cached = c.Usage.PromptTokensDetails.CachedTokens
	}
	if c.Usage != nil && s.finished && c.Usage.CompletionTokens != s.tokens {
		return false, fmt.Errorf("usage says %d completion tokens, the stream carried %d", c.Usage.CompletionTokens, s.tokens)
	}
	if len(c.Choices) > 1 {
		return false, fmt.Errorf("a chunk with %d choices; one was asked for", len(c.Choices))
	}
	for _, ch := range c.Choices {
		if len(ch.TokenIDs) > 0 {
			if s.finished {
				return false, errors.New("tokens after the finish_reason")
			}
			// The previous chunk was not the last: its tokens go to Run.
			s.released = append(s.released, s.held...)
			s.held = s.held[:0]
			for _, t := range ch.TokenIDs {
				s.held = append(s.held, workload.Token{ID: s.id, Token: t, At: at})
			}
			s.tokens += len(ch.TokenIDs)
		}
		if ch.FinishReason != nil {
			s.finished = true
		}
	}
	return false, nil
}

// statusError turns an error response into an error carrying the server's
// message.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error *apiErrorBody `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != nil && body.Error.Message != "" {
		return fmt.Errorf("HTTP %d (%s): %s", resp.StatusCode, body.Error.Type, body.Error.Message)
	}
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

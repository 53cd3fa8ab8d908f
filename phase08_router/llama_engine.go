package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"kvlab/common/tokenizer"
	"kvlab/common/workload"
)

// llamaEngine is workload.Engine over llama-server's own API: each request
// is one POST /completion of the prompt's token ids, greedy, with
// ignore_eos, and with return_tokens so that the generated ids come back
// (llama-server's OpenAI endpoints return text only, and a follow-up turn
// is built from the ids). The answer's timings.cache_n is the prompt
// tokens the server found cached.
//
// llama-server parses every answer's text as a chat message, and a random
// model's lone byte tokens (a UTF-8 continuation byte, say) make text that
// is not UTF-8, which fails the parse with a 500 ("does not match the
// expected Content-only format"). So each request bans, by logit_bias,
// the tokens whose piece is not valid UTF-8 on its own (ban): the outputs
// are still greedy among the rest, the same for every policy. The answer
// is not streamed, so every token of a request arrives at once and TTFT
// is the request's whole latency.
//
// Submit starts the request on its own goroutine and returns, so arrivals
// never wait for the server; Run waits on the engine (workload.Waiter).
type llamaEngine struct {
	ban     [][2]any // logit_bias entries: [id, false]
	base    string
	client  *http.Client
	timeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	ready   []workload.Token
	open    int
	cached  map[int]int
	arrived chan struct{}
}

func newLlamaEngine(ctx context.Context, base string, timeout time.Duration, ban [][2]any) *llamaEngine {
	ctx, cancel := context.WithCancel(ctx)
	return &llamaEngine{
		ban: ban, base: strings.TrimRight(base, "/"), client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256, DisableCompression: true}},
		timeout: timeout, ctx: ctx, cancel: cancel, cached: map[int]int{}, arrived: make(chan struct{}, 1),
	}
}

func (e *llamaEngine) Submit(id int, prompt []int32, maxTokens int) error {
	body, err := json.Marshal(map[string]any{
		"prompt": prompt, "n_predict": maxTokens, "temperature": 0, "ignore_eos": true,
		"return_tokens": true, "cache_prompt": true, "logit_bias": e.ban,
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.open++
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.stream(id, body)
	}()
	return nil
}

func (e *llamaEngine) Step() []workload.Token { return e.Wait(0) }

func (e *llamaEngine) Busy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open > 0
}

func (e *llamaEngine) Wait(d time.Duration) []workload.Token {
	if out := e.take(); len(out) > 0 || d == 0 {
		return out
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-e.arrived:
	case <-timeout:
	}
	return e.take()
}

func (e *llamaEngine) take() []workload.Token {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.ready
	e.ready = nil
	for _, ev := range out {
		if ev.Done || ev.Err != nil {
			e.open--
		}
	}
	return out
}

// CachedTokens is the server's timings.cache_n for request id.
func (e *llamaEngine) CachedTokens(id int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cached[id]
}

func (e *llamaEngine) Close() {
	e.cancel()
	e.wg.Wait()
	e.client.CloseIdleConnections()
}

func (e *llamaEngine) push(evs ...workload.Token) {
	if len(evs) == 0 {
		return
	}
	e.mu.Lock()
	e.ready = append(e.ready, evs...)
	e.mu.Unlock()
	select {
	case e.arrived <- struct{}{}:
	default:
	}
}

// stream runs one request to its end: one event per token, the last marked
// Done, or an error event.
func (e *llamaEngine) stream(id int, body []byte) {
	ctx, cancel := e.ctx, context.CancelFunc(func() {})
	if e.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
	}
	defer cancel()
	toks, cached, err := e.complete(ctx, body)
	if err == nil && len(toks) == 0 {
		err = fmt.Errorf("the answer has no token")
	}
	if err != nil {
		e.push(workload.Token{ID: id, Err: err, At: time.Now()})
		return
	}
	e.mu.Lock()
	e.cached[id] = cached
	e.mu.Unlock()
	at := time.Now()
	evs := make([]workload.Token, len(toks))
	for i, t := range toks {
		evs[i] = workload.Token{ID: id, Token: t, At: at, Done: i == len(toks)-1}
	}
	e.push(evs...)
}

// complete posts body and returns the generated tokens and
// timings.cache_n.
func (e *llamaEngine) complete(ctx context.Context, body []byte) ([]int32, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/completion", bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b[:min(len(b), 4<<10)]))
	}
	var c struct {
		Tokens  []int32 `json:"tokens"`
		Timings *struct {
			CacheN int `json:"cache_n"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, 0, fmt.Errorf("an answer that is not JSON: %w", err)
	}
	if c.Timings == nil {
		return nil, 0, fmt.Errorf("the answer has no timings")
	}
	return c.Tokens, c.Timings.CacheN, nil
}

// nonUTF8Tokens returns a logit_bias that bans every token of tok whose
// piece is not valid UTF-8 by itself.
func nonUTF8Tokens(tok *tokenizer.Tokenizer) [][2]any {
	var out [][2]any
	for id := range int32(tok.VocabSize()) {
		if !tok.IsSpecial(id) && !utf8.Valid(tok.Piece(id)) {
			out = append(out, [2]any{id, false})
		}
	}
	return out
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

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
	*workload.Remote
	ban     [][2]any // logit_bias entries: [id, false]
	base    string
	client  *http.Client
	timeout time.Duration
}

func newLlamaEngine(ctx context.Context, base string, timeout time.Duration, ban [][2]any) *llamaEngine {
	return &llamaEngine{
		Remote:  workload.NewRemote(ctx),
		ban:     ban,
		base:    strings.TrimRight(base, "/"),
		client:  &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256, DisableCompression: true}},
		timeout: timeout,
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
	e.Start(func(ctx context.Context) { e.stream(ctx, id, body) })
	return nil
}

func (e *llamaEngine) Close() {
	e.Remote.Close()
	e.client.CloseIdleConnections()
}

// stream runs one request to its end: one event per token, the last marked
// Done, or an error event.
func (e *llamaEngine) stream(ctx context.Context, id int, body []byte) {
	cancel := context.CancelFunc(func() {})
	if e.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
	}
	defer cancel()
	toks, cached, err := e.complete(ctx, body)
	if err == nil && len(toks) == 0 {
		err = fmt.Errorf("the answer has no token")
	}
	if err != nil {
		e.Push(workload.Token{ID: id, Err: err, At: time.Now()})
		return
	}
	e.SetCached(id, cached)
	at := time.Now()
	evs := make([]workload.Token, len(toks))
	for i, t := range toks {
		evs[i] = workload.Token{ID: id, Token: t, At: at, Done: i == len(toks)-1}
	}
	e.Push(evs...)
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
	for _, id := range tok.PartialCharacters() {
		out = append(out, [2]any{id, false})
	}
	return out
}

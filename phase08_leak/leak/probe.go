// Package leak holds the experiments of phase08_leak: the time-to-first-
// token side channel of a shared prefix cache, what cache salts cost, and
// per-tenant cache shares against a noisy neighbour.
package leak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Probe is one streamed completion as a tenant sees it: how long the first
// chunk took, and what the server's usage said.
type Probe struct {
	TTFT   time.Duration // request sent to first streamed chunk read
	Prompt int           // usage.prompt_tokens
	Cached int           // usage.prompt_tokens_details.cached_tokens
}

// Client sends streamed completions to one server over HTTP.
type Client struct {
	URL  string // http://host:port
	HTTP *http.Client
}

type chunk struct {
	Choices []json.RawMessage `json:"choices"`
	Usage   *struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// Send posts prompt (token ids) under salt ("" for none) to
// /v1/completions as a stream of one greedy token with usage included, and
// times the first chunk.
func (c Client) Send(ctx context.Context, salt string, prompt []int32) (Probe, error) {
	req := map[string]any{
		"prompt": prompt, "max_tokens": 1, "temperature": 0, "ignore_eos": true,
		"stream": true, "stream_options": map[string]bool{"include_usage": true},
	}
	if salt != "" {
		req["cache_salt"] = salt
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Probe{}, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return Probe{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	start := time.Now()
	resp, err := hc.Do(hreq)
	if err != nil {
		return Probe{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return Probe{}, fmt.Errorf("leak: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var p Probe
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if p.TTFT == 0 {
			p.TTFT = time.Since(start)
		}
		if data == "[DONE]" {
			break
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return Probe{}, fmt.Errorf("leak: bad chunk %q: %w", data, err)
		}
		if u := ch.Usage; u != nil {
			p.Prompt = u.PromptTokens
			if u.PromptTokensDetails != nil {
				p.Cached = u.PromptTokensDetails.CachedTokens
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Probe{}, err
	}
	if p.Prompt == 0 {
		return Probe{}, fmt.Errorf("leak: the stream carried no usage")
	}
	return p, nil
}

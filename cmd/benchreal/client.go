package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"kvlab/common/metrics"
	"kvlab/common/tokenizer"
	"kvlab/common/workload"
)

// Both servers are driven through llama-server's own POST /completion,
// which serve implements field for field (docs/serving.md): the prompt as
// token ids, greedy, ignore_eos, streamed, with the generated ids in every
// event (return_tokens) and the prompt tokens found cached in the last
// event's timings.cache_n. llama-server's OpenAI endpoints stream text
// only, so bench -url, which counts the ids of vLLM's return_token_ids,
// cannot read them; one client on one endpoint measures both servers the
// same way.

// completionBody is the request both servers get.
type completionBody struct {
	Prompt       []int32  `json:"prompt"`
	NPredict     int      `json:"n_predict"`
	Temperature  float64  `json:"temperature"`
	TopK         int      `json:"top_k"` // llama-server: greedy even if temperature 0 meant otherwise; serve ignores it
	IgnoreEOS    bool     `json:"ignore_eos"`
	CachePrompt  bool     `json:"cache_prompt"`
	Stream       bool     `json:"stream"`
	ReturnTokens bool     `json:"return_tokens"`
	LogitBias    [][2]any `json:"logit_bias,omitempty"`
}

// event is one streamed /completion event, partial or final.
type event struct {
	Tokens  []int32 `json:"tokens"`
	Stop    bool    `json:"stop"`
	Timings *struct {
		PromptN int `json:"prompt_n"`
		CacheN  int `json:"cache_n"`
	} `json:"timings"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// stream is what the client saw of one request.
type stream struct {
	start  time.Time   // the request was sent
	times  []time.Time // when each token's event was read
	tokens []int32
	end    time.Time // the last event was read
	cached int       // timings.cache_n
}

// ttft is the time from sending to the first token.
func (s stream) ttft() time.Duration {
	if len(s.times) == 0 {
		return 0
	}
	return s.times[0].Sub(s.start)
}

// decodeRate is tokens per second from the first token to the last: the
// tokens after the first over the time they took.
func (s stream) decodeRate() float64 {
	n := len(s.times)
	if n < 2 {
		return 0
	}
	d := s.times[n-1].Sub(s.times[0]).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(n-1) / d
}

// target is one server as the client sends to it.
type target struct {
	url string
	// ban is a logit_bias that bans tokens (llama-server only; see
	// nonUTF8Tokens), or nil.
	ban [][2]any
}

// complete posts one greedy streamed completion of prompt (n tokens) to
// t and reads its stream to the end.
func complete(ctx context.Context, client *http.Client, t target, prompt []int32, n int) (stream, error) {
	body, err := json.Marshal(completionBody{Prompt: prompt, NPredict: n, TopK: 1, IgnoreEOS: true, CachePrompt: true, Stream: true, ReturnTokens: true, LogitBias: t.ban})
	if err != nil {
		return stream{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/completion", bytes.NewReader(body))
	if err != nil {
		return stream{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	s := stream{start: time.Now()}
	resp, err := client.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return s, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	err = readEvents(resp.Body, func(ev event, at time.Time) {
		for _, t := range ev.Tokens {
			s.tokens = append(s.tokens, t)
			s.times = append(s.times, at)
		}
		if ev.Stop && ev.Timings != nil {
			s.cached = ev.Timings.CacheN
		}
		s.end = at
	})
	if err == nil && len(s.tokens) != n {
		err = fmt.Errorf("asked for %d tokens, the stream carried %d", n, len(s.tokens))
	}
	return s, err
}

// readEvents reads server-sent events from r up to the one with "stop":
// true, calling f with each and the time its data line was read.
func readEvents(r io.Reader, f func(event, time.Time)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		at := time.Now()
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if ok {
			data = bytes.TrimSpace(data)
			if string(data) == "[DONE]" {
				return errors.New("[DONE] before an event with stop")
			}
			var ev event
			if jerr := json.Unmarshal(data, &ev); jerr != nil {
				return fmt.Errorf("bad event %.200q: %w", data, jerr)
			}
			if ev.Error != nil {
				return fmt.Errorf("server error: %s", ev.Error.Message)
			}
			f(ev, at)
			if ev.Stop {
				return nil
			}
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("stream ended before its last event: %w", err)
		}
	}
}

// promptTokens returns n seeded random token ids in [lo, vocab): the same
// prompt for both servers, a new one for each seed.
func promptTokens(seed uint64, n, lo, vocab int) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x6265_6e63_6872_6561))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(lo + r.IntN(vocab-lo))
	}
	return out
}

// serving sends reqs to t, conc at a time (closed loop: a request goes
// out as soon as one of the conc in flight ends), and returns what the
// client saw as a metrics.Run: each request's arrival is when it was sent,
// so TTFT is the server's queueing and prefill, not the client's.
func serving(ctx context.Context, client *http.Client, t target, reqs []workload.Request, conc int) (*metrics.Run, error) {
	recs := make([]metrics.RequestRecord, len(reqs))
	next := make(chan int, len(reqs))
	for i := range reqs {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	start := time.Now()
	for range min(conc, len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				q := reqs[i]
				s, err := complete(ctx, client, t, q.Prompt, q.MaxTokens)
				rec := metrics.RequestRecord{ID: q.ID, PromptLen: len(q.Prompt), OutputLen: len(s.tokens), CachedTokens: s.cached,
					Arrival: s.start.Sub(start), Finish: s.end.Sub(start)}
				for _, at := range s.times {
					rec.TokenTimes = append(rec.TokenTimes, at.Sub(start))
				}
				if len(rec.TokenTimes) > 0 {
					rec.FirstToken = rec.TokenTimes[0]
				}
				if err != nil {
					rec.Err = err.Error()
					mu.Lock()
					errs = append(errs, fmt.Errorf("request %d: %w", q.ID, err))
					mu.Unlock()
				}
				recs[i] = rec
			}
		}()
	}
	wg.Wait()
	run := &metrics.Run{Requests: recs, Wall: time.Since(start)}
	return run, errors.Join(errs...)
}

// limitedServing is serving cut at limit (none when 0): a server that
// stalls — llama-server's threads waiting at a barrier for one the hogs
// have descheduled, say — costs the run limit, not the benchmark. The
// requests unfinished when it passes are cut and count as failed, so the
// summary has Failed > 0 and its row says how many finished
// (servingRow); any other failure is the run's error.
func limitedServing(ctx context.Context, limit time.Duration, client *http.Client, t target, reqs []workload.Request, conc int) (metrics.Summary, error) {
	rctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	run, err := serving(rctx, client, t, reqs, conc)
	if err != nil && (ctx.Err() != nil || rctx.Err() == nil) {
		return metrics.Summary{}, err
	}
	return run.Summary(), nil
}

// nonUTF8Tokens returns a logit_bias banning every token of tok whose
// piece is not valid UTF-8 by itself (a lone byte of a longer character,
// say). llama-server parses every answer's text as a chat message, also
// on /completion, and fails the request at its end when a random model's
// output is not UTF-8 ("does not match the expected Content-only
// format"); the ban keeps its outputs greedy among the other tokens. It
// changes which tokens come out, not how many nor what each costs.
func nonUTF8Tokens(tok *tokenizer.Tokenizer) [][2]any {
	var out [][2]any
	for _, id := range tok.PartialCharacters() {
		out = append(out, [2]any{id, false})
	}
	return out
}

// banned reports whether id is in ban.
func banned(ban [][2]any, id int32) bool {
	for _, b := range ban {
		if b[0] == any(id) {
			return true
		}
	}
	return false
}

// newClient is a client for servers on loopback: no proxy, no
// compression (which would hold events back), and a new connection for
// every request: llama-server closes a kept connection it deems idle, and
// a POST sent on it as it closes fails (Go does not retry a POST), while
// a connection on loopback costs a fraction of a millisecond.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}}
}

// firstDifference returns the index of the first token where a and b
// differ, or -1 when they are the same.
func firstDifference(a, b []int32) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// idList writes ids as "1,2,3" (for logs).
func idList(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}

package router

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"kvlab/common/tokenizer"
)

// Key is what a request is routed on: its tenant's cache salt and the
// token ids the replica will compute. Replicas never share KV between
// salts, so two tenants' identical prompts are different keys, and the
// router must not send one tenant after the other's prefix.
type Key struct {
	Salt   string
	Tokens []int32
}

// RouteKey returns the key of the request body sent to path: its cache_salt
// (as the replica reads it) and the token ids the replica will compute. A
// text prompt is encoded as the replica encodes it (EncodePrompt, with
// BOS), a chat rendered with the model's template, token ids taken as they
// are. Nothing is normalised — not whitespace, not timestamps: two prompts
// that differ by one byte are different token streams, and a key that hides
// the difference sends a request where its prefix is not (PITFALLS.md,
// "Canonicalising prompts gives different prompts one route key"). It
// returns nil when the body has no prompt it can read; such a request is
// routed by load alone, and the replica answers it with the error it
// deserves.
func RouteKey(tok *tokenizer.Tokenizer, path string, body []byte) Key {
	var q struct {
		CacheSalt string          `json:"cache_salt"`
		Prompt    json.RawMessage `json:"prompt"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &q) != nil {
		return Key{}
	}
	return Key{Salt: q.CacheSalt, Tokens: routeTokens(tok, path, q.Prompt, q.Messages)}
}

// routeTokens returns the token ids of a prompt or a chat, or nil.
func routeTokens(tok *tokenizer.Tokenizer, path string, prompt json.RawMessage, messages []struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}) []int32 {
	if path == "/v1/chat/completions" {
		if tok == nil || !tok.HasChatTemplate() || len(messages) == 0 {
			return nil
		}
		msgs := make([]tokenizer.Message, len(messages))
		for i, m := range messages {
			text, ok := contentText(m.Content)
			if !ok {
				return nil
			}
			role := m.Role
			if role == "developer" {
				role = "system" // the replica renames it the same way
			}
			msgs[i] = tokenizer.Message{Role: role, Content: text}
		}
		ids, err := tok.EncodeChat(msgs, true)
		if err != nil {
			return nil
		}
		return ids
	}
	return promptKey(tok, prompt)
}

// promptKey reads a completions prompt: a string, token ids, or a
// one-element array of either.
func promptKey(tok *tokenizer.Tokenizer, raw json.RawMessage) []int32 {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if tok == nil || text == "" {
			return nil
		}
		return tok.EncodePrompt(text)
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		return ids
	}
	var batch []json.RawMessage
	if json.Unmarshal(raw, &batch) == nil && len(batch) == 1 {
		return promptKey(tok, batch[0])
	}
	return nil
}

// contentText reads a chat message's content: a string or text parts.
func contentText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// ReplicaHeader names, on every proxied response, the index of the replica
// that served it.
const ReplicaHeader = "X-Kvlab-Replica"

// outcome is how one attempt at a replica ended.
type outcome int

const (
	served  outcome = iota // relayed to the client, whole or as far as the client stayed
	retry                  // the replica failed before a byte reached the client
	aborted                // the replica failed mid-stream; the client got an error event
)

// proxy sends a request to the replica the policy picks and relays the
// answer, trying another replica while nothing has reached the client, at
// most Options.Retries times (resilience.go).
func (rt *Router) proxy(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rt.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body is over %d bytes", rt.opts.MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_body", "reading the request body: "+err.Error())
		return
	}
	path := canonicalPath(strings.TrimSuffix(r.URL.Path, "/"))
	key := RouteKey(rt.opts.Tokenizer, path, body)
	sp, _ := rt.opts.Policy.(SlotPolicy)
	slotting := sp != nil && rt.opts.Slots > 0
	clientSlot := slotting && clientNamesSlot(body)
	tried := map[int]bool{}
	var last *failure
	lastReplica := -1
	for {
		cands := rt.candidates(tried)
		if len(cands) == 0 || last != nil && len(tried) > rt.opts.Retries {
			writeFailure(w, last, lastReplica, len(tried))
			return
		}
		if last != nil {
			rt.metrics.retries.Inc()
		}
		d := rt.opts.Policy.Pick(key, cands)
		tried[d.Replica] = true
		rt.metrics.decisions.WithLabelValues(d.Reason).Inc()
		rt.metrics.matched.WithLabelValues(strconv.Itoa(d.Replica)).Add(float64(d.Matched))
		a := attempt{replica: d.Replica, path: path, body: body, key: key, slot: -1}
		if slotting && len(key.Tokens) > 0 {
			a.sp = sp // learns the slot from the answer, whoever chose it
		}
		if clientSlot {
			rt.metrics.slotted.WithLabelValues("client").Inc() // the client chose; its bytes go as they came
		} else if a.sp != nil {
			a.slot = rt.pickSlot(r.Context(), sp, key, d)
			if a.slot >= 0 {
				a.body = withIDSlot(body, a.slot)
				rt.metrics.slotted.WithLabelValues("named").Inc()
			} else {
				rt.metrics.slotted.WithLabelValues("replica").Inc()
			}
		}
		out, f := rt.forward(w, r, a)
		if a.slot >= 0 {
			rt.holdSlot(a.replica, a.slot, -1)
		}
		if out == served {
			rt.succeeded(d.Replica)
			return
		}
		if f == nil {
			return // the client left; nobody to retry for
		}
		rt.failed(d.Replica, f)
		if f.down {
			rt.markDown(d.Replica, f)
		}
		if out == aborted {
			rt.metrics.aborted.Inc()
			return
		}
		if r.Context().Err() != nil {
			return
		}
		last, lastReplica = f, d.Replica
	}
}

// writeFailure answers a request no replica served: 503 when none was up
// to try, else 504 when the last attempt timed out and 502 otherwise,
// naming the last failure.
func writeFailure(w http.ResponseWriter, last *failure, replica, attempts int) {
	if last == nil {
		writeError(w, http.StatusServiceUnavailable, "no_replica", "no replica is up")
		return
	}
	status, code := http.StatusBadGateway, "replica_failed"
	if last.timeout {
		status, code = http.StatusGatewayTimeout, "replica_timeout"
	}
	writeError(w, status, code, fmt.Sprintf("%d attempts at replicas failed; the last, at replica %d: %v", attempts, replica, last))
}

// attempt is one try of a request at one replica.
type attempt struct {
	replica int
	path    string
	body    []byte // what the replica receives: the client's bytes, with id_slot when slot >= 0
	key     Key
	sp      SlotPolicy // nil unless the router routes to slots
	slot    int        // the slot named in body, held until the attempt ends; -1: none
}

// pickSlot chooses the slot of d.Replica for key and holds it: a warmed
// one when the policy moved the request off its prefix's full replica,
// else the policy's pick. -1 leaves the choice to the replica.
func (rt *Router) pickSlot(ctx context.Context, sp SlotPolicy, key Key, d Decision) int {
	if d.Overflow && rt.opts.WarmSlots {
		if s := rt.warm(ctx, sp, key, d.Home, d.Replica); s >= 0 {
			return s // held by warm
		}
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	loads := rt.replicas[d.Replica].slots
	s := sp.PickSlot(key, d.Replica, loads)
	if s >= 0 {
		loads[s]++
	}
	return s
}

// forward makes one attempt at a replica: it sends the attempt's body and
// relays the answer, under the attempt's timeouts. The failure is nil when
// the attempt served the client, or when the client went away.
func (rt *Router) forward(w http.ResponseWriter, r *http.Request, a attempt) (outcome, *failure) {
	i := a.replica
	rep := rt.replicas[i]
	rt.addLoad(i, 1)
	defer rt.addLoad(i, -1)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	relaying := rt.pend(i, cancel) // from here on, a hung replica's health check may move the attempt
	defer relaying()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rep.url+a.path, bytes.NewReader(a.body))
	if err != nil {
		return retry, &failure{reason: "broken", err: err}
	}
	for _, h := range []string{"Content-Type", "Accept", "Authorization", "X-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	timer := time.AfterFunc(rt.opts.ResponseTimeout, func() { cancel(errResponseTimeout) })
	resp, err := rt.client.Do(req)
	timer.Stop()
	if err != nil {
		return retry, transportFailure(ctx, r.Context(), err)
	}
	defer resp.Body.Close()
	body := newIdleReader(resp.Body, rt.opts.IdleTimeout, func() { cancel(errIdleTimeout) })
	if resp.StatusCode >= 500 {
		// Nothing reached the client: another replica can serve it. (A
		// 503 is a replica shutting down; a 500 one that fails, whatever
		// its /health says.)
		io.Copy(io.Discard, io.LimitReader(body, 64<<10))
		return retry, statusFailure(resp.StatusCode)
	}
	// The policy learns the route once the replica has taken the request;
	// a refused one (400, 429) left nothing in its cache.
	if resp.StatusCode == http.StatusOK {
		rt.opts.Policy.Routed(a.key, i)
		if a.sp != nil && a.slot >= 0 {
			a.sp.RoutedSlot(a.key, i, a.slot)
		}
	}
	rt.metrics.requests.WithLabelValues(strconv.Itoa(i)).Inc()
	u := usageSeen{slot: -1}
	defer func() {
		rt.metrics.count(i, u)
		// A request the replica placed itself: its answer says where
		// (llama-server's id_slot on /completion).
		if a.sp != nil && a.slot < 0 && u.slot >= 0 && u.slot < rt.opts.Slots && resp.StatusCode == http.StatusOK {
			a.sp.RoutedSlot(a.key, i, u.slot)
		}
	}()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return rt.relayStream(w, resp, body, ctx, r.Context(), i, &u, relaying)
	}
	// A whole JSON answer is read before anything is written, so a replica
	// dying half-way through it can still be retried.
	b, err := io.ReadAll(body)
	if err != nil {
		return retry, transportFailure(ctx, r.Context(), err)
	}
	if resp.StatusCode == http.StatusOK {
		u.observe(b)
	}
	relaying()
	if ctx.Err() != nil { // moved by a health check just before
		return retry, transportFailure(ctx, r.Context(), ctx.Err())
	}
	copyHeaders(w.Header(), resp.Header)
	w.Header().Set(ReplicaHeader, strconv.Itoa(i))
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
	return served, nil
}

// relayStream copies server-sent events from the replica (body, resp's
// body under the idle timeout) to the client one event at a time,
// flushing each. The client's headers wait for the first event, so a
// replica that breaks or stalls before sending one is retried as if it had
// never answered. ctx is the attempt's context, client the request's;
// relaying is called before the first byte goes to the client.
func (rt *Router) relayStream(w http.ResponseWriter, resp *http.Response, body io.Reader, ctx, client context.Context, i int, u *usageSeen, relaying func()) (outcome, *failure) {
	flusher, _ := w.(http.Flusher)
	br := bufio.NewReaderSize(body, 32<<10)
	var event []byte
	started := false
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(event) == 0 && len(line) == 0 && started {
				return served, nil // the replica ended the stream cleanly
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			f := transportFailure(ctx, client, err)
			if !started {
				if f != nil {
					f.err = fmt.Errorf("stream broken before its first event: %w", f.err)
				}
				return retry, f
			}
			if f == nil {
				return served, nil // the client went away
			}
			// Tokens already reached the client: the request cannot be
			// started again elsewhere without sending them twice.
			b, _ := json.Marshal(newErrorBody("replica_failed", fmt.Sprintf("replica %d failed mid-stream: %v", i, f)))
			fmt.Fprintf(w, "data: %s\n\n", b)
			if flusher != nil {
				flusher.Flush()
			}
			return aborted, f
		}
		event = append(event, line...)
		if len(bytes.TrimRight(line, "\r\n")) > 0 {
			continue // an event ends at a blank line
		}
		if !started {
			relaying()
			if ctx.Err() != nil { // moved by a health check just before
				return retry, transportFailure(ctx, client, ctx.Err())
			}
			started = true
			copyHeaders(w.Header(), resp.Header)
			w.Header().Set(ReplicaHeader, strconv.Itoa(i))
			w.WriteHeader(resp.StatusCode)
		}
		if _, err := w.Write(event); err != nil {
			return served, nil // the client went away; the request's context stops the replica
		}
		if flusher != nil {
			flusher.Flush()
		}
		u.observeEvent(event)
		event = event[:0]
	}
}

// copyHeaders copies the headers a client needs from the replica's answer.
func copyHeaders(dst, src http.Header) {
	for _, h := range []string{"Content-Type", "Cache-Control", "X-Accel-Buffering", "Retry-After"} {
		if v := src.Get(h); v != "" {
			dst.Set(h, v)
		}
	}
}

// usageSeen is what a replica's answer said about the prompt: its length,
// the tokens it found cached, and the slot that ran it. The last report
// wins (a stream carries it in its last events).
type usageSeen struct {
	prompt, cached int
	seen           bool
	slot           int // llama-server's id_slot; -1 if the answer named none
}

// observeEvent reads the data of one server-sent event.
func (u *usageSeen) observeEvent(event []byte) {
	for line := range bytes.Lines(event) {
		if v, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			u.observe(bytes.TrimSpace(v))
		}
	}
}

// observe reads one JSON answer or chunk: OpenAI's usage, or on
// /completion the prompt's length (tokens_evaluated) with the tokens found
// cached. Those are timings.cache_n where the answer has it: llama-server's
// tokens_cached is not a hit count but every token the slot holds after the
// request, the prompt and the generated tokens (23 prompt tokens and 4
// generated report 26, on a first request that found nothing). A replica
// without timings (this project's serve) reports its hits as tokens_cached.
func (u *usageSeen) observe(b []byte) {
	// Most chunks carry none of these; skip them without decoding.
	if !bytes.Contains(b, []byte(`"usage"`)) && !bytes.Contains(b, []byte(`"tokens_cached"`)) && !bytes.Contains(b, []byte(`"id_slot"`)) {
		return
	}
	var v struct {
		Usage *struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		TokensEvaluated *int `json:"tokens_evaluated"`
		TokensCached    *int `json:"tokens_cached"`
		Timings         *struct {
			CacheN *int `json:"cache_n"`
		} `json:"timings"`
		IDSlot *int `json:"id_slot"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	if v.IDSlot != nil && *v.IDSlot >= 0 {
		u.slot = *v.IDSlot
	}
	switch {
	case v.Usage != nil:
		u.prompt, u.cached, u.seen = v.Usage.PromptTokens, 0, true
		if d := v.Usage.PromptTokensDetails; d != nil {
			u.cached = d.CachedTokens
		}
	case v.TokensCached != nil && v.TokensEvaluated != nil && *v.TokensEvaluated > 0:
		u.prompt, u.cached, u.seen = *v.TokensEvaluated, *v.TokensCached, true
		if v.Timings != nil && v.Timings.CacheN != nil {
			u.cached = *v.Timings.CacheN
		}
	}
}

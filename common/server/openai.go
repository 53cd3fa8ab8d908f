package server

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// openAIRequest holds the fields /v1/completions and /v1/chat/completions
// share. Optional numbers are pointers, so "absent" and "zero" differ.
type openAIRequest struct {
	Model               string          `json:"model"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"` // chat's newer name for max_tokens
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	N                   *int            `json:"n"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"` // a string or an array of strings
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// vLLM's extensions, which benchmarks send: generate max_tokens tokens
	// whatever the model says, and return the generated token ids.
	IgnoreEOS      bool `json:"ignore_eos"`
	ReturnTokenIDs bool `json:"return_token_ids"`
	// CacheSalt is vLLM's cache_salt: requests reuse cached KV only of
	// requests with the same salt (engine.Request.CacheSalt).
	CacheSalt string `json:"cache_salt"`
	// IDSlot is llama-server's slot (slots.go), which its /v1 endpoints
	// take too; absent or -1 lets the server choose.
	IDSlot *int `json:"id_slot"`
	// LogitBias is added to the logits before sampling (logitbias.go).
	LogitBias json.RawMessage `json:"logit_bias"`
	// TopK is vLLM's and llama-server's top_k; 0 or below: off.
	TopK *int `json:"top_k"`
	// NPredict is llama-server's name for max_tokens, which its /v1
	// endpoints read too; it wins over max_tokens, as there.
	NPredict *int `json:"n_predict"`
	// TimingsPerToken is llama-server's: the timings so far on every
	// stream chunk, not only on the last.
	TimingsPerToken bool `json:"timings_per_token"`
	// grammar, json_schema and response_format (structured.go)
	structuredFields
	ResponseFormat json.RawMessage `json:"response_format"`
}

// completionRequest is a /v1/completions body.
type completionRequest struct {
	openAIRequest
	Prompt json.RawMessage `json:"prompt"` // a string, token ids, or a one-element array of either
	// Logprobs asks for each token's logprob and the n most likely tokens
	// at its position, in the legacy shape (logprobs.go); null or false:
	// none.
	Logprobs json.RawMessage `json:"logprobs"`
	// Echo puts the prompt's text before each choice's completion.
	Echo bool `json:"echo"`
}

// usage is OpenAI's token accounting. CachedTokens is the number a
// cache-aware router reads.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		// CachedByTier splits CachedTokens by where they were found: the
		// KV pool ("GPU", as vLLM names it) and each cache tier ("CPU",
		// "DISK"); absent without tiers.
		CachedByTier map[string]int `json:"cached_tokens_by_tier,omitempty"`
		// MissByReason says why the other prompt tokens were computed
		// (misses.Reasons: cold, evicted, salt, partial, preempted);
		// absent when all were cached.
		MissByReason map[string]int `json:"miss_tokens_by_reason,omitempty"`
	} `json:"prompt_tokens_details"`
}

func newUsage(r *genResult) *usage {
	u := &usage{PromptTokens: r.promptTokens, CompletionTokens: r.completion, TotalTokens: r.promptTokens + r.completion}
	u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CachedByTier = r.cached, r.cachedByTier
	u.PromptTokensDetails.MissByReason = r.misses.ByName()
	return u
}

// options checks the shared fields and fills g with them. defaultMax is
// the output length when the client names none.
func (h *Handler) options(q *openAIRequest, g *genRequest, defaultMax int) *apiError {
	if e := h.checkModel(q.Model); e != nil {
		return e
	}
	g.maxTokens, g.timingsPerToken = defaultMax, q.TimingsPerToken
	if n := h.opts.Defaults.NPredict; n != nil && *n >= 0 { // --n-predict; -1 keeps the endpoint's
		g.maxTokens = *n
	}
	for _, m := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}, {"n_predict", q.NPredict}} {
		if m.v == nil || m.name == "n_predict" && *m.v == -1 { // n_predict -1: no limit of its own
			continue
		}
		if *m.v < 0 { // 0 evaluates the prompt into the cache and generates nothing, as on llama-server
			return errBadRequest(m.name, "%s must be at least 0, have %d", m.name, *m.v)
		}
		g.maxTokens, g.maxParam = *m.v, m.name
	}
	// OpenAI's default is 1; a negative temperature is greedy sampling, as
	// llama-server takes it.
	if t := q.Temperature; t != nil && (*t > 2 || math.IsNaN(*t)) {
		return errBadRequest("temperature", "temperature must be at most 2 (below 0: greedy), have %v", *t)
	}
	g.sampling.Temperature = h.opts.Defaults.temperature(q.Temperature, 1)
	if q.TopP != nil {
		if p := *q.TopP; p <= 0 || p > 1 || math.IsNaN(p) {
			return errBadRequest("top_p", "top_p must be in (0, 1], have %v", p)
		}
		g.sampling.TopP = *q.TopP
	}
	g.sampling.TopK = topK(q.TopK)
	g.n = 1
	if q.N != nil {
		if *q.N < 1 || *q.N > h.opts.MaxN {
			return errBadRequest("n", "n must be in [1, %d] on this server (--max-n), have %d", h.opts.MaxN, *q.N)
		}
		g.n = *q.N
	}
	g.sampling.Seed = rand.Uint64()
	if q.Seed == nil && h.opts.Defaults.Seed != nil && *h.opts.Defaults.Seed >= 0 { // --seed
		g.sampling.Seed = uint64(*h.opts.Defaults.Seed)
	}
	if q.Seed != nil {
		g.sampling.Seed = uint64(*q.Seed)
	}
	stop, e := parseStop(q.Stop)
	if e != nil {
		return e
	}
	g.stop = stop
	g.ignoreEOS = q.IgnoreEOS
	g.cacheSalt = q.CacheSalt
	g.slot = -1
	if q.IDSlot != nil && *q.IDSlot >= 0 {
		g.slot = *q.IDSlot
	}
	if g.sampling.LogitBias, e = h.parseLogitBias(q.LogitBias); e != nil {
		return e
	}
	return h.structured(&q.structuredFields, q.ResponseFormat, g)
}

// parseStop accepts null, a string, or an array of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errBadRequest("stop", "stop must be a string or an array of strings")
	}
	var out []string
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// completionPrompt is /v1/completions' prompt as token ids: its nesting
// bounded (nesting.go), then read.
func (h *Handler) completionPrompt(raw json.RawMessage) ([]int32, *apiError) {
	if e := checkNesting(raw, "prompt", maxPromptNesting); e != nil {
		return nil, e
	}
	return h.prompt(raw)
}

// prompt turns a completions prompt into token ids: text through the
// tokenizer (with BOS where the model expects one), ids as they are. Each
// level of arrays is read again by the level inside it, so the caller
// bounds the nesting first (checkNesting): the cost is then at most
// maxPromptNesting readings of the value.
func (h *Handler) prompt(raw json.RawMessage) ([]int32, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errBadRequest("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" && (h.opts.Tokenizer == nil || len(h.opts.Tokenizer.EncodePrompt("")) == 0) {
			return []int32{}, nil // nothing to evaluate: an empty answer (generate), as llama-server gives
		}
		if h.opts.Tokenizer == nil {
			return nil, errBadRequest("prompt", "this model has no tokenizer.json: send the prompt as an array of token ids")
		}
		return h.opts.Tokenizer.EncodePrompt(text), nil
	}
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err == nil {
		return tokenIDs(ids)
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err != nil {
		return nil, errBadRequest("prompt", "prompt must be a string, an array of token ids, or a one-element array of either")
	}
	if i, v, ok := nonInteger(batch); ok {
		return nil, errBadRequest("prompt", "token ids must be integers: element %d of the prompt is %s", i, v)
	}
	if len(batch) != 1 {
		return nil, errBadRequest("prompt", "prompt holds %d prompts; this server takes one per request", len(batch))
	}
	return h.prompt(batch[0])
}

// nonInteger finds, in an array of JSON numbers that did not decode as
// integers, the first that is not one; ok is false when some element is
// not a number at all (then the array is something else, such as a batch).
func nonInteger(elems []json.RawMessage) (i int, v string, ok bool) {
	first := -1
	for j, e := range elems {
		var f float64
		if json.Unmarshal(e, &f) != nil {
			return 0, "", false
		}
		if first < 0 && (f != math.Trunc(f) || math.Abs(f) > math.MaxInt64/2) {
			first = j
		}
	}
	if first < 0 {
		return 0, "", false
	}
	return first, string(elems[first]), true
}

// tokenIDs checks that ids fit int32 (the engine checks the vocabulary).
func tokenIDs(ids []int64) ([]int32, *apiError) {
	if len(ids) == 0 {
		return nil, errBadRequest("prompt", "prompt is empty")
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return nil, errBadRequest("prompt", "token id %d at position %d is out of range", id, i)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// choice is one sample's result in a completions response.
type completionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	TokenIDs     []int32 `json:"token_ids,omitempty"`
	FinishReason *string `json:"finish_reason"`
	Logprobs     any     `json:"logprobs"`
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage,omitempty"`
	// Timings is llama-server's extension: on a whole answer, and on a
	// stream's chunk that ends a sample and its usage chunk.
	Timings *llamaTimings `json:"timings,omitempty"`
}

func (h *Handler) completions(w http.ResponseWriter, r *http.Request) {
	var q completionRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	var g genRequest
	if e := h.options(&q.openAIRequest, &g, 16); e != nil {
		writeError(w, e)
		return
	}
	nLogprobs, e := completionLogprobsAsked(&q, &g)
	if e != nil {
		writeError(w, e)
		return
	}
	prompts, e := h.completionPrompts(q.Prompt) // one, or a batch (openai_batch.go)
	if e != nil {
		writeError(w, e)
		return
	}
	g.prompt = prompts[0]
	if len(prompts) > 1 && q.Echo {
		writeError(w, errUnsupportedPrompt("echo", "echo is not supported with several prompts in one request; send them one per request"))
		return
	}
	echo := "" // echo: the prompt's text, before each choice's (logprobs.go)
	if q.Echo {
		echo = h.echoText(q.Prompt, g.prompt)
	}
	echoed := make([]bool, g.n*len(prompts)) // streaming: the prompt went out in the sample's first chunk
	offsets := make([]int, g.n*len(prompts)) // streaming: where the next chunk's text starts in the choice
	rid := h.newID()
	id := fmt.Sprintf("cmpl-%d", rid)
	created := time.Now().Unix()
	reply := func(choices []completionChoice, u *usage, t *llamaTimings) completionResponse {
		return completionResponse{ID: id, Object: "text_completion", Created: created, Model: h.opts.ModelName, SystemFingerprint: buildInfo(), Choices: choices, Usage: u, Timings: t}
	}
	reply1 := func(s replyShape) { h.openAIReply(w, r, &q.openAIRequest, rid, g, s) }
	if len(prompts) > 1 {
		reply1 = func(s replyShape) { h.openAIReplyBatch(w, r, &q.openAIRequest, g, prompts, s) }
	}
	reply1(replyShape{
		whole: func(res *genResult) any {
			choices := make([]completionChoice, len(res.samples))
			for i, s := range res.samples {
				choices[i] = completionChoice{Index: i, Text: echo + s.text.String(), TokenIDs: q.idsIfAsked(orEmpty(s.ids)), FinishReason: &s.finish}
				if nLogprobs >= 0 {
					choices[i].Logprobs, _ = h.completionLogprobsOf(s.probs, nLogprobs, 0)
				}
			}
			return reply(choices, newUsage(res), llamaTimingsOf(res))
		},
		chunk: func(p piece) []any {
			c := completionChoice{Index: p.sample, Text: p.text, TokenIDs: q.idsIfAsked(p.ids)}
			if !echoed[p.sample] {
				echoed[p.sample], c.Text = true, echo+c.Text
			}
			if nLogprobs >= 0 {
				c.Logprobs, offsets[p.sample] = h.completionLogprobsOf(p.probs, nLogprobs, offsets[p.sample])
			}
			if p.finish != "" {
				c.FinishReason = &p.finish
			}
			return []any{reply([]completionChoice{c}, nil, p.timings)}
		},
		usage: func(res *genResult) any { return reply([]completionChoice{}, newUsage(res), llamaTimingsOf(res)) },
	})
}

// replyShape is how an OpenAI endpoint words its answer: the whole
// response at once, one stream chunk per piece, and the usage chunk that
// ends a stream when the client asks for it.
type replyShape struct {
	whole func(res *genResult) any
	chunk func(p piece) []any // one piece may make more than one chunk
	usage func(res *genResult) any
}

// openAIReply runs g and answers r in the shape s gives: one JSON body, or
// server-sent events ending with the usage chunk (if asked) and [DONE].
func (h *Handler) openAIReply(w http.ResponseWriter, r *http.Request, q *openAIRequest, rid int, g genRequest, s replyShape) {
	if !q.Stream {
		res, e := h.generate(r.Context(), rid, g, func(piece) error { return nil })
		if e != nil {
			writeError(w, e)
			return
		}
		writeJSON(w, http.StatusOK, s.whole(res))
		return
	}
	out := newSSE(w)
	res, e := h.generate(r.Context(), rid, g, func(p piece) error {
		for _, c := range s.chunk(p) {
			if err := out.send(c); err != nil {
				return err
			}
		}
		return nil
	})
	if e != nil {
		out.fail(e)
		return
	}
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		if out.send(s.usage(res)) != nil {
			return
		}
	}
	_ = out.raw([]byte("[DONE]"))
}

// idsIfAsked returns ids if the client asked for token ids, else nil (the
// field is then left out).
func (q *openAIRequest) idsIfAsked(ids []int32) []int32 {
	if q.ReturnTokenIDs {
		return ids
	}
	return nil
}

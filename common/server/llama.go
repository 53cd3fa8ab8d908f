package server

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"kvlab/common/engine"
)

// llamaRequest is a body of llama-server's POST /completion, with the
// fields its clients (and prefix-aware routers) send.
type llamaRequest struct {
	// Prompt is a string, token ids, a mix of both, or an array of such
	// prompts: each is its own generation, answered in order with its
	// index.
	Prompt      json.RawMessage `json:"prompt"`
	NPredict    *int            `json:"n_predict"`  // -1: until end of sequence or context
	MaxTokens   *int            `json:"max_tokens"` // n_predict's other name; n_predict wins, as on llama-server
	TopK        *int            `json:"top_k"`      // 0 or below: off (llama-server's default is 40; here it is off)
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	Seed        *int64          `json:"seed"` // -1: random
	Stop        []string        `json:"stop"`
	Stream      bool            `json:"stream"`
	IgnoreEOS   bool            `json:"ignore_eos"`
	// NProbs asks for each generated token's probability and the n most
	// probable tokens at its position (completion_probabilities), from the
	// model's raw softmax, reported as logprob; with PostSamplingProbs,
	// the sampler's distribution (after bias, temperature and top-p),
	// reported as prob and top_probs, as llama-server writes them.
	NProbs            int  `json:"n_probs"`
	PostSamplingProbs bool `json:"post_sampling_probs"`
	// ReturnProgress sends prompt_progress events before a stream's first
	// token: the prompt's tokens, how many came from the cache, how many
	// are processed, and the time the prompt took (progressReports).
	ReturnProgress bool `json:"return_progress"`
	// TimingsPerToken puts the timings so far on every stream event, the
	// progress reports included, not only on the last.
	TimingsPerToken bool `json:"timings_per_token"`
	// ResponseFields keeps only these paths ("a/b") of the final answer.
	ResponseFields []string `json:"response_fields"`
	// CachePrompt asks llama-server to reuse the slot's KV for a repeated
	// prefix. Here one prefix cache serves every request, and it is on
	// when the server runs with --prefix-caching; the field is accepted and
	// echoed, not obeyed per request.
	CachePrompt *bool `json:"cache_prompt"`
	// CacheSalt keeps this request's cached KV apart from other tenants',
	// as on the OpenAI endpoints.
	CacheSalt string `json:"cache_salt"`
	// IDSlot picks one of the --parallel slots (slots.go); -1 or absent
	// lets the server choose the one whose last prompt shares the longest
	// prefix.
	IDSlot *int `json:"id_slot"`
	// LogitBias is added to the logits before sampling (logitbias.go).
	LogitBias json.RawMessage `json:"logit_bias"`
	// grammar and json_schema (structured.go)
	structuredFields
}

// llamaTimings is llama-server's per-request timing report, plus cache_n,
// which newer llama-server versions added.
type llamaTimings struct {
	PromptN             int     `json:"prompt_n"` // prompt tokens computed (not found in the cache)
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	CacheN              int     `json:"cache_n"` // prompt tokens found in the cache
}

// llamaResponse is /completion's answer, and the last event of its stream
// (llama-server's final result).
type llamaResponse struct {
	Index              int                `json:"index"`
	Content            string             `json:"content"`
	Tokens             []int32            `json:"tokens"`
	IDSlot             int                `json:"id_slot"`
	Stop               bool               `json:"stop"`
	Model              string             `json:"model"`
	TokensPredicted    int                `json:"tokens_predicted"`
	TokensEvaluated    int                `json:"tokens_evaluated"`
	GenerationSettings generationSettings `json:"generation_settings"`
	Prompt             string             `json:"prompt"`
	HasNewLine         bool               `json:"has_new_line"`
	Truncated          bool               `json:"truncated"` // the generation stopped because the context was full (a prompt too long is refused, not cut)
	StopType           string             `json:"stop_type"` // "eos", "limit", "word" or "none" (cut short)
	StoppingWord       string             `json:"stopping_word"`
	TokensCached       int                `json:"tokens_cached"`
	// TokensCachedByTier splits TokensCached by where the KV was found,
	// with cache tiers (usage's cached_tokens_by_tier).
	TokensCachedByTier map[string]int  `json:"tokens_cached_by_tier,omitempty"`
	Timings            *llamaTimings   `json:"timings"`
	Probs              []tokenProbJSON `json:"completion_probabilities,omitempty"`
	CachePrompt        bool            `json:"cache_prompt"`
}

// llamaPartial is one event of a /completion stream before the last.
type llamaPartial struct {
	Index           int             `json:"index"`
	Content         string          `json:"content"`
	Tokens          []int32         `json:"tokens"`
	Stop            bool            `json:"stop"`
	IDSlot          int             `json:"id_slot"`
	TokensPredicted int             `json:"tokens_predicted"`
	TokensEvaluated int             `json:"tokens_evaluated"`
	Probs           []tokenProbJSON `json:"completion_probabilities,omitempty"`
	Progress        *promptProgress `json:"prompt_progress,omitempty"`
	Timings         *llamaTimings   `json:"timings,omitempty"` // with timings_per_token
}

// promptProgress is a return_progress report, an event of its own before
// the first token's (on chat, a chunk with no choices).
type promptProgress struct {
	Total     int     `json:"total"`
	Cache     int     `json:"cache"`
	Processed int     `json:"processed"`
	TimeMS    float64 `json:"time_ms"`
}

// progressReports are the progress reports of a prompt of n tokens, made
// with the generation's first piece p. llama-server sends one when the
// prompt starts (processed = cache, the tokens found cached) and one per
// batch it computes; the engine does not report a prompt's chunks, so
// there are two, both sent once the prompt is done: where it started and
// where it ended (processed = total, the time the prompt took).
func progressReports(p piece, n int) []*promptProgress {
	start := &promptProgress{Total: n, Cache: p.cached, Processed: p.cached}
	if p.cached >= n {
		return []*promptProgress{start}
	}
	return []*promptProgress{start, {Total: n, Cache: p.cached, Processed: n, TimeMS: ms(p.at.Sub(p.start))}}
}

// timingsIf is the request's timings when a progress report is made, if
// asked (timings_per_token): the prompt's tokens computed so far and their
// time, nothing predicted yet; else nil.
func (pr *promptProgress) timingsIf(asked bool) *llamaTimings {
	if !asked {
		return nil
	}
	t := &llamaTimings{PromptN: pr.Processed - pr.Cache, PromptMS: pr.TimeMS, CacheN: pr.Cache}
	if t.PromptN > 0 && t.PromptMS > 0 {
		t.PromptPerTokenMS = t.PromptMS / float64(t.PromptN)
		t.PromptPerSecond = 1000 * float64(t.PromptN) / t.PromptMS
	}
	return t
}

// tokenProbJSON is one generated token in completion_probabilities: its
// text (valid UTF-8 only; the whole piece is in bytes), its log
// probability, and the most probable tokens at its position.
type tokenProbJSON struct {
	ID      int32          `json:"id"`
	Token   string         `json:"token"`
	Bytes   []int          `json:"bytes"`
	Logprob float64        `json:"logprob"`
	Top     []tokenLogprob `json:"top_logprobs"`
	// post writes prob and top_probs instead (post_sampling_probs).
	post bool
	prob float32
}

type tokenLogprob struct {
	ID      int32   `json:"id"`
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
	post    bool    // as tokenProbJSON's
	prob    float32
}

func (h *Handler) llamaCompletion(w http.ResponseWriter, r *http.Request) {
	var q llamaRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	g := genRequest{n: 1, ignoreEOS: q.IgnoreEOS, sampling: llamaDefaults(), cacheSalt: q.CacheSalt, slot: -1, timingsPerToken: q.TimingsPerToken}
	g.maxTokens = h.es.ContextLimit()
	nPredict := -1
	if q.NPredict == nil {
		q.NPredict = q.MaxTokens
	}
	if n := q.NPredict; n != nil || h.opts.Defaults.NPredict != nil {
		if n == nil {
			n = h.opts.Defaults.NPredict // --n-predict
		}
		switch {
		case *n == -1:
		case *n < 0:
			writeError(w, errBadRequest("n_predict", "n_predict must be -1 (no limit), 0 (evaluate the prompt only) or more, have %d", *n))
			return
		default: // 0 evaluates the prompt into the cache and generates nothing (generate)
			g.maxTokens, nPredict = *n, *n
		}
	}
	if t := q.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0)) {
		writeError(w, errBadRequest("temperature", "temperature must be a finite number, have %v", *t))
		return
	}
	g.sampling.Temperature = h.opts.Defaults.temperature(q.Temperature, g.sampling.Temperature)
	if q.TopP != nil {
		if p := *q.TopP; p <= 0 || p > 1 || math.IsNaN(p) {
			writeError(w, errBadRequest("top_p", "top_p must be in (0, 1], have %v", p))
			return
		}
		g.sampling.TopP = *q.TopP
	}
	g.sampling.TopK = topK(q.TopK)
	if seed, ok := h.opts.Defaults.seed(q.Seed); ok && int64(seed) >= 0 {
		g.sampling.Seed = seed
	}
	if q.NProbs < 0 || q.NProbs > engine.MaxTopProbs {
		writeError(w, errBadRequest("n_probs", "n_probs must be in [0, %d], have %d", engine.MaxTopProbs, q.NProbs))
		return
	}
	g.topProbs, g.postSampling = q.NProbs, q.PostSamplingProbs
	g.responseFields = q.ResponseFields
	var e *apiError
	if g.sampling.LogitBias, e = h.parseLogitBias(q.LogitBias); e != nil {
		writeError(w, e)
		return
	}
	if e = h.structured(&q.structuredFields, nil, &g); e != nil {
		writeError(w, e)
		return
	}
	for _, s := range q.Stop {
		if s != "" {
			g.stop = append(g.stop, s)
		}
	}
	if q.IDSlot != nil && *q.IDSlot >= 0 {
		g.slot = *q.IDSlot
	}
	prompts, e := h.prompts(q.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	g.settings = h.withEOSBias(settingsOf(g, nPredict, q.Stream, q.NProbs))
	cachePrompt := q.CachePrompt == nil || *q.CachePrompt

	var out *sse
	if q.Stream {
		out = newSSE(w)
	}
	// Every prompt is its own generation, all at once; the first failure
	// cancels the others and is the answer.
	finals := make([]llamaResponse, len(prompts))
	fails := h.sideBySide(r.Context(), len(prompts), func(ctx context.Context, i int) (f *apiError) {
		gi := g
		gi.prompt = prompts[i]
		finals[i], f = h.llamaOne(ctx, i, gi, out, cachePrompt, q.ReturnProgress)
		return f
	})
	if reportFailure(w, r, out, fails) {
		return
	}
	switch {
	case out != nil:
		return // each generation sent its last event
	case len(finals) == 1:
		writeJSON(w, http.StatusOK, onlyFields(finals[0], q.ResponseFields))
	default:
		all := make([]any, len(finals))
		for i, f := range finals {
			all[i] = onlyFields(f, q.ResponseFields)
		}
		writeJSON(w, http.StatusOK, all)
	}
}

// llamaOne runs the generation of prompt number index and returns its
// final answer; streaming, it sends every event itself, the final one
// included.
func (h *Handler) llamaOne(ctx context.Context, index int, g genRequest, out *sse, cachePrompt, progress bool) (llamaResponse, *apiError) {
	rid := h.newID()
	first := true
	var res *genResult
	res, e := h.generate(ctx, rid, g, func(p piece) error {
		if out == nil || p.finish != "" && p.text == "" && len(p.ids) == 0 {
			return nil
		}
		ev := llamaPartial{Index: index, Content: p.text, Tokens: orEmpty(p.ids), IDSlot: p.slot,
			TokensPredicted: p.generated, TokensEvaluated: len(g.prompt), Probs: h.probsJSON(p.probs, g.postSampling), Timings: p.timings}
		if first && progress {
			for _, pr := range progressReports(p, len(g.prompt)) {
				pe := llamaPartial{Index: index, Tokens: []int32{}, IDSlot: p.slot, TokensEvaluated: len(g.prompt), Progress: pr, Timings: pr.timingsIf(g.timingsPerToken)}
				if err := out.send(pe); err != nil {
					return err
				}
			}
		}
		first = false
		return out.send(ev)
	})
	if e != nil {
		return llamaResponse{}, e
	}
	s := &res.samples[0]
	final := llamaResponse{
		Index: index, Content: s.text.String(), Tokens: orEmpty(s.ids), IDSlot: res.slot, Stop: true, Model: h.opts.ModelName,
		TokensPredicted: res.completion, TokensEvaluated: res.promptTokens, GenerationSettings: g.settings,
		Prompt: h.piecesText(g.prompt), HasNewLine: strings.Contains(s.text.String(), "\n"),
		StopType: map[string]string{"stop": "eos", "length": "limit", "abort": "none"}[s.finish], StoppingWord: s.word,
		TokensCached: res.cached, TokensCachedByTier: res.cachedByTier, Timings: llamaTimingsOf(res), Probs: h.probsJSON(s.probs, g.postSampling), CachePrompt: cachePrompt,
		Truncated: s.finish == "length" && res.promptTokens+len(s.ids) >= h.es.ContextLimit(),
	}
	if s.word != "" {
		final.StopType = "word"
	}
	if out == nil {
		return final, nil
	}
	final.Content, final.Tokens, final.Probs = "", []int32{}, nil // already streamed
	if err := out.send(onlyFields(final, g.responseFields)); err != nil {
		return llamaResponse{}, clientGone(err)
	}
	return final, nil
}

// probsJSON writes probabilities as completion_probabilities; nil when none
// were asked for.
func (h *Handler) probsJSON(ps []tokenProbs, post bool) []tokenProbJSON {
	if len(ps) == 0 {
		return nil
	}
	out := make([]tokenProbJSON, len(ps))
	for i, p := range ps {
		text, bytes := h.pieceJSON(p.id)
		out[i] = tokenProbJSON{ID: p.id, Token: text, Bytes: bytes, Logprob: logprob(p.prob), Top: make([]tokenLogprob, len(p.top)), post: post, prob: p.prob}
		for j, t := range p.top {
			text, bytes := h.pieceJSON(t.ID)
			out[i].Top[j] = tokenLogprob{ID: t.ID, Token: text, Bytes: bytes, Logprob: logprob(t.Prob), post: post, prob: t.Prob}
		}
	}
	return out
}

// pieceJSON returns a token's text, cut to its valid UTF-8 prefix, and
// its bytes.
func (h *Handler) pieceJSON(id int32) (string, []int) {
	var b []byte
	if h.opts.Tokenizer != nil {
		b = h.opts.Tokenizer.Piece(id)
	}
	bytes := make([]int, len(b))
	for i, c := range b {
		bytes[i] = int(c)
	}
	return string(b[:completePrefix(b)]), bytes
}

// completePrefix is the length of b's longest prefix that is whole UTF-8.
func completePrefix(b []byte) int {
	n := 0
	for n < len(b) {
		r, size := utf8.DecodeRune(b[n:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		n += size
	}
	return n
}

// logprob is ln p, with JSON's stand-in for -inf (JSON has no infinity):
// the lowest float32, as llama-server writes it.
func logprob(p float32) float64 {
	if p == 0 {
		return -math.MaxFloat32
	}
	return math.Log(float64(p))
}

// llamaDefaults is llama-server's default sampling: temperature 0.8,
// top-p 0.95, a random seed.
func llamaDefaults() engine.Sampling {
	return engine.Sampling{Temperature: 0.8, TopP: 0.95, Seed: rand.Uint64()}
}

func llamaTimingsOf(r *genResult) *llamaTimings {
	t := &llamaTimings{PromptN: r.promptTokens - r.cached, CacheN: r.cached, PredictedN: r.completion}
	if !r.firstToken.IsZero() {
		t.PromptMS = ms(r.firstToken.Sub(r.start))
		t.PredictedMS = ms(r.lastToken.Sub(r.firstToken))
	}
	if t.PromptN > 0 && t.PromptMS > 0 {
		t.PromptPerTokenMS = t.PromptMS / float64(t.PromptN)
		t.PromptPerSecond = 1000 * float64(t.PromptN) / t.PromptMS
	}
	// The first token comes with the prompt; the rest are decode steps.
	if n := t.PredictedN - 1; n > 0 && t.PredictedMS > 0 {
		t.PredictedPerTokenMS = t.PredictedMS / float64(n)
		t.PredictedPerSecond = 1000 * float64(n) / t.PredictedMS
	}
	return t
}

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// prompts reads /completion's prompt in each form llama-server takes: a
// string, token ids, an array mixing strings and ids (one prompt), or an
// array of any of these (one generation each).
func (h *Handler) prompts(raw json.RawMessage) ([][]int32, *apiError) {
	if e := checkNesting(raw, "prompt", maxPromptNesting); e != nil {
		return nil, e
	}
	raw, e := promptStrings(raw) // {"prompt_string": ...} objects
	if e != nil {
		return nil, e
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil || isMixed(elems) || allInts(elems) {
		p, e := h.mixedPrompt(raw)
		return [][]int32{p}, e
	}
	if len(elems) == 0 {
		return nil, errBadRequest("prompt", "prompt is empty")
	}
	out := make([][]int32, len(elems))
	for i, el := range elems {
		var inner []json.RawMessage
		var s string
		if json.Unmarshal(el, &s) != nil && (json.Unmarshal(el, &inner) != nil || !isMixed(inner) && !allInts(inner)) {
			return nil, errBadRequest("prompt", "element %d of prompt must be a string, token ids, or a mix of strings and ids", i)
		}
		var e *apiError
		if out[i], e = h.mixedPrompt(el); e != nil {
			e.Message = "prompt " + strconv.Itoa(i) + ": " + e.Message
			return nil, e
		}
	}
	return out, nil
}

// mixedPrompt reads one prompt: a string, token ids, or strings and ids
// mixed, each string tokenized in place (with BOS only when a string
// comes first, llama-server's rule).
func (h *Handler) mixedPrompt(raw json.RawMessage) ([]int32, *apiError) {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil || !isMixed(elems) {
		return h.prompt(raw)
	}
	t := h.opts.Tokenizer
	if t == nil {
		return nil, errBadRequest("prompt", "this model has no tokenizer.json: send the prompt as an array of token ids")
	}
	var ids []int32
	for i, el := range elems {
		var s string
		if json.Unmarshal(el, &s) == nil {
			if i == 0 {
				ids = append(ids, t.EncodePrompt(s)...)
			} else {
				ids = append(ids, t.Encode(s)...)
			}
			continue
		}
		var id int64
		if err := json.Unmarshal(el, &id); err != nil || id < 0 || id > math.MaxInt32 {
			return nil, errBadRequest("prompt", "element %d of the prompt is %s: want a string or a token id", i, el)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// isMixed reports whether elems holds both strings and integers.
func isMixed(elems []json.RawMessage) bool {
	str, num := false, false
	for _, el := range elems {
		if len(el) > 0 && el[0] == '"' {
			str = true
		} else {
			var n int64
			num = num || json.Unmarshal(el, &n) == nil
		}
	}
	return str && num
}

// allInts reports whether elems is a non-empty array of integers.
func allInts(elems []json.RawMessage) bool {
	for _, el := range elems {
		var n int64
		if json.Unmarshal(el, &n) != nil {
			return false
		}
	}
	return len(elems) > 0
}

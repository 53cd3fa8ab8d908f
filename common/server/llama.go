package server

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"

	"kvlab/common/engine"
)

// llamaRequest is a body of llama-server's POST /completion, with the
// fields its clients (and prefix-aware routers) send.
type llamaRequest struct {
	Prompt      json.RawMessage `json:"prompt"`
	NPredict    *int            `json:"n_predict"` // -1: until end of sequence or context
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	Seed        *int64          `json:"seed"` // -1: random
	Stop        []string        `json:"stop"`
	Stream      bool            `json:"stream"`
	IgnoreEOS   bool            `json:"ignore_eos"`
	// CachePrompt asks llama-server to reuse the slot's KV for a repeated
	// prefix. Here one prefix cache serves every request, and it is on
	// when the server runs with --prefix-caching; the field is accepted and
	// echoed, not obeyed per request.
	CachePrompt *bool `json:"cache_prompt"`
	// CacheSalt keeps this request's cached KV apart from other tenants',
	// as on the OpenAI endpoints.
	CacheSalt string `json:"cache_salt"`
	// IDSlot picks one of llama-server's slots, each with its own KV. This
	// engine has no slots: it batches every request over one paged pool.
	// The id is accepted and reported back so slot-aware clients work.
	IDSlot *int `json:"id_slot"`
}

// llamaTimings is llama-server's per-request timing report.
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

// llamaResponse is /completion's answer, and the last event of its stream.
type llamaResponse struct {
	Content         string        `json:"content"`
	Tokens          []int32       `json:"tokens"`
	IDSlot          int           `json:"id_slot"`
	Stop            bool          `json:"stop"`
	Model           string        `json:"model,omitempty"`
	TokensPredicted int           `json:"tokens_predicted,omitempty"`
	TokensEvaluated int           `json:"tokens_evaluated,omitempty"`
	TokensCached    int           `json:"tokens_cached"`
	StopType        string        `json:"stop_type,omitempty"` // "eos", "limit", "word" or "abort"
	StoppingWord    string        `json:"stopping_word,omitempty"`
	CachePrompt     bool          `json:"cache_prompt"`
	Timings         *llamaTimings `json:"timings,omitempty"`
}

func (h *Handler) llamaCompletion(w http.ResponseWriter, r *http.Request) {
	var q llamaRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	g := genRequest{n: 1, ignoreEOS: q.IgnoreEOS, sampling: llamaDefaults(), cacheSalt: q.CacheSalt}
	g.maxTokens = h.es.ContextLimit()
	if q.NPredict != nil {
		switch n := *q.NPredict; {
		case n == -1:
		case n <= 0:
			writeError(w, errBadRequest("n_predict", "n_predict must be -1 (no limit) or at least 1, have %d", n))
			return
		default:
			g.maxTokens = n
		}
	}
	if q.Temperature != nil {
		if t := *q.Temperature; t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
			writeError(w, errBadRequest("temperature", "temperature must be a finite number ≥ 0, have %v", t))
			return
		}
		g.sampling.Temperature = *q.Temperature
	}
	if q.TopP != nil {
		if p := *q.TopP; p <= 0 || p > 1 || math.IsNaN(p) {
			writeError(w, errBadRequest("top_p", "top_p must be in (0, 1], have %v", p))
			return
		}
		g.sampling.TopP = *q.TopP
	}
	if q.Seed != nil && *q.Seed >= 0 {
		g.sampling.Seed = uint64(*q.Seed)
	}
	for _, s := range q.Stop {
		if s != "" {
			g.stop = append(g.stop, s)
		}
	}
	var e *apiError
	if g.prompt, e = h.prompt(q.Prompt); e != nil {
		writeError(w, e)
		return
	}
	slot := 0
	if q.IDSlot != nil && *q.IDSlot >= 0 {
		slot = *q.IDSlot
	}
	cachePrompt := q.CachePrompt == nil || *q.CachePrompt

	var out *sse
	if q.Stream {
		out = newSSE(w)
	}
	rid := h.newID()
	res, e := h.generate(r.Context(), rid, g, func(p piece) error {
		if out == nil || p.finish != "" && p.text == "" && len(p.ids) == 0 {
			return nil
		}
		return out.send(llamaResponse{Content: p.text, Tokens: orEmpty(p.ids), IDSlot: slot, CachePrompt: cachePrompt})
	})
	if e != nil {
		if out != nil {
			out.fail(e)
		} else {
			writeError(w, e)
		}
		return
	}
	s := &res.samples[0]
	final := llamaResponse{
		Content: s.text.String(), Tokens: orEmpty(s.ids), IDSlot: slot, Stop: true, Model: h.opts.ModelName,
		TokensPredicted: res.completion, TokensEvaluated: res.promptTokens, TokensCached: res.cached,
		StopType: map[string]string{"stop": "eos", "length": "limit", "abort": "abort"}[s.finish], StoppingWord: s.word,
		CachePrompt: cachePrompt, Timings: llamaTimingsOf(res),
	}
	if s.word != "" {
		final.StopType = "word"
	}
	if out == nil {
		writeJSON(w, http.StatusOK, final)
		return
	}
	final.Content, final.Tokens = "", []int32{} // already streamed
	_ = out.send(final)
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

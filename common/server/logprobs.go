package server

import (
	"bytes"
	"encoding/json"

	"kvlab/common/engine"
)

// OpenAI's logprobs, from the probabilities the engine attaches to each
// token (engine.Request.TopProbs): the log-softmax of the model's logits
// as they leave the forward pass, before logit bias, temperature or top-p,
// which is what llama-server's n_probs (without post_sampling_probs) and
// vLLM's default (raw logprobs) report. A token whose probability
// underflows float32 is written -3.4e38, JSON having no -Inf.

// maxTopLogprobs is OpenAI's bound on chat's top_logprobs.
const maxTopLogprobs = 20

// completionLogprobs is /v1/completions' legacy shape (OpenAI's and
// vLLM's, which evaluation harnesses read): per token its text, its
// logprob, the n most likely tokens at its position with theirs, and where
// its text starts in the choice's text. Content is the same tokens in
// chat's shape, which is what llama-server answers here: a client of
// either finds its keys.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
	Content       []chatTokenLogprob   `json:"content"`
}

// completionLogprobsOf writes ps in the legacy shape with n alternatives
// each, the first token's text starting at offset; it returns where the
// text after the last token starts.
func (h *Handler) completionLogprobsOf(ps []tokenProbs, n, offset int) (*completionLogprobs, int) {
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{},
		Content: h.chatLogprobsOf(ps, n).Content}
	for _, p := range ps {
		text, _ := h.pieceJSON(p.id)
		out.Tokens = append(out.Tokens, text)
		out.TokenLogprobs = append(out.TokenLogprobs, logprob(p.prob))
		top := map[string]float64{}
		for _, t := range p.top[:min(n, len(p.top))] {
			tt, _ := h.pieceJSON(t.ID)
			if _, dup := top[tt]; !dup { // two tokens of one text: the likelier
				top[tt] = logprob(t.Prob)
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(text)
	}
	return out, offset
}

// chatLogprobs is a chat choice's logprobs: one entry per token of the
// content.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
	Refusal *string            `json:"refusal"` // always null: no refusals here
}

// chatTokenLogprob is one token's entry; ID is llama-server's addition to
// OpenAI's shape.
type chatTokenLogprob struct {
	ID          int32            `json:"id"`
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	ID      int32   `json:"id"`
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprobsOf writes ps in chat's shape with n alternatives each.
func (h *Handler) chatLogprobsOf(ps []tokenProbs, n int) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, len(ps))}
	for i, p := range ps {
		text, bytes := h.pieceJSON(p.id)
		c := chatTokenLogprob{ID: p.id, Token: text, Logprob: logprob(p.prob), Bytes: bytes, TopLogprobs: []chatTopLogprob{}}
		for _, t := range p.top[:min(n, len(p.top))] {
			tt, tb := h.pieceJSON(t.ID)
			c.TopLogprobs = append(c.TopLogprobs, chatTopLogprob{ID: t.ID, Token: tt, Logprob: logprob(t.Prob), Bytes: tb})
		}
		out.Content[i] = c
	}
	return out
}

// completionLogprobsAsked checks /v1/completions' logprobs and echo and
// returns the alternatives to report per token, -1 for no logprobs.
func completionLogprobsAsked(q *completionRequest, g *genRequest) (int, *apiError) {
	switch string(bytes.TrimSpace(q.Logprobs)) {
	case "", "null", "false": // false: what a client that shares chat's body means
		return -1, nil
	}
	var n int
	if err := json.Unmarshal(q.Logprobs, &n); err != nil {
		return 0, errBadRequest("logprobs", "logprobs must be an integer (the alternatives per token) or null, have %s", clip(q.Logprobs))
	}
	if n < 0 || n > engine.MaxTopProbs {
		return 0, errBadRequest("logprobs", "logprobs must be in [0, %d], have %d", engine.MaxTopProbs, n)
	}
	if q.Echo {
		e := errBadRequest("echo", "echo together with logprobs is not supported by this server (the prompt's logprobs are not computed); send one of them")
		e.Code = "not_supported"
		return 0, e
	}
	g.topProbs = max(n, 1) // the engine reports a token's own probability only with alternatives
	return n, nil
}

// chatLogprobsAsked checks chat's logprobs and top_logprobs and returns
// the alternatives to report per token, -1 for no logprobs.
func chatLogprobsAsked(q *chatRequest, g *genRequest) (int, *apiError) {
	on := q.Logprobs != nil && *q.Logprobs
	n := 0
	if q.TopLogprobs != nil {
		n = *q.TopLogprobs
		if n < 0 || n > maxTopLogprobs {
			return 0, errBadRequest("top_logprobs", "top_logprobs must be in [0, %d], have %d", maxTopLogprobs, n)
		}
		if n > 0 && !on {
			return 0, errBadRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
	}
	if !on {
		return -1, nil
	}
	g.topProbs = max(n, 1)
	return n, nil
}

// echoText is the prompt as echo writes it: a string prompt as sent, token
// ids as their text.
func (h *Handler) echoText(raw []byte, ids []int32) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var one []string // a one-element array of a string
	if json.Unmarshal(raw, &one) == nil && len(one) == 1 {
		return one[0]
	}
	if h.opts.Tokenizer == nil {
		return ""
	}
	return h.opts.Tokenizer.Decode(ids)
}

// MarshalJSON writes a token's probabilities as llama-server does: its
// logprob and top_logprobs, or with post_sampling_probs its prob and
// top_probs.
func (t tokenProbJSON) MarshalJSON() ([]byte, error) {
	type plain tokenProbJSON
	if !t.post {
		return json.Marshal(plain(t))
	}
	return json.Marshal(struct {
		ID    int32          `json:"id"`
		Token string         `json:"token"`
		Bytes []int          `json:"bytes"`
		Prob  float32        `json:"prob"`
		Top   []tokenLogprob `json:"top_probs"`
	}{t.ID, t.Token, t.Bytes, t.prob, t.Top})
}

// MarshalJSON is tokenProbJSON's for one alternative.
func (t tokenLogprob) MarshalJSON() ([]byte, error) {
	type plain tokenLogprob
	if !t.post {
		return json.Marshal(plain(t))
	}
	return json.Marshal(struct {
		ID    int32   `json:"id"`
		Token string  `json:"token"`
		Bytes []int   `json:"bytes"`
		Prob  float32 `json:"prob"`
	}{t.ID, t.Token, t.Bytes, t.prob})
}

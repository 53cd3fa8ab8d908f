package server

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"kvlab/common/engine"
	"kvlab/common/tokenizer"
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
}

// completionRequest is a /v1/completions body.
type completionRequest struct {
	openAIRequest
	Prompt json.RawMessage `json:"prompt"` // a string, token ids, or a one-element array of either
}

// chatRequest is a /v1/chat/completions body.
type chatRequest struct {
	openAIRequest
	Messages []chatMessage `json:"messages"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of {"type":"text","text":...}
}

// usage is OpenAI's token accounting. CachedTokens is the number a
// cache-aware router reads.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func newUsage(r *genResult) *usage {
	u := &usage{PromptTokens: r.promptTokens, CompletionTokens: r.completion, TotalTokens: r.promptTokens + r.completion}
	u.PromptTokensDetails.CachedTokens = r.cached
	return u
}

// options checks the shared fields and fills g with them. defaultMax is
// the output length when the client names none.
func (h *Handler) options(q *openAIRequest, g *genRequest, defaultMax int) *apiError {
	if e := h.checkModel(q.Model); e != nil {
		return e
	}
	g.maxTokens = defaultMax
	for _, m := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}} {
		if m.v == nil {
			continue
		}
		if *m.v <= 0 {
			return errBadRequest(m.name, "%s must be at least 1, have %d", m.name, *m.v)
		}
		g.maxTokens = *m.v
	}
	g.sampling.Temperature = 1 // OpenAI's default
	if q.Temperature != nil {
		if t := *q.Temperature; t < 0 || t > 2 || math.IsNaN(t) {
			return errBadRequest("temperature", "temperature must be in [0, 2], have %v", t)
		}
		g.sampling.Temperature = *q.Temperature
	}
	if q.TopP != nil {
		if p := *q.TopP; p <= 0 || p > 1 || math.IsNaN(p) {
			return errBadRequest("top_p", "top_p must be in (0, 1], have %v", p)
		}
		g.sampling.TopP = *q.TopP
	}
	g.n = 1
	if q.N != nil {
		if *q.N < 1 || *q.N > engine.MaxSamples {
			return errBadRequest("n", "n must be in [1, %d], have %d", engine.MaxSamples, *q.N)
		}
		g.n = *q.N
	}
	g.sampling.Seed = rand.Uint64()
	if q.Seed != nil {
		g.sampling.Seed = uint64(*q.Seed)
	}
	stop, e := parseStop(q.Stop)
	if e != nil {
		return e
	}
	g.stop = stop
	g.ignoreEOS = q.IgnoreEOS
	return nil
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

// prompt turns a completions prompt into token ids: text through the
// tokenizer (with BOS where the model expects one), ids as they are.
func (h *Handler) prompt(raw json.RawMessage) ([]int32, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errBadRequest("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return nil, errBadRequest("prompt", "prompt is empty")
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
	if len(batch) != 1 {
		return nil, errBadRequest("prompt", "prompt holds %d prompts; this server takes one per request", len(batch))
	}
	return h.prompt(batch[0])
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
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
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
	var e *apiError
	if g.prompt, e = h.prompt(q.Prompt); e != nil {
		writeError(w, e)
		return
	}
	rid := h.newID()
	id := fmt.Sprintf("cmpl-%d", rid)
	created := time.Now().Unix()
	chunk := func(choices []completionChoice, u *usage) completionResponse {
		return completionResponse{ID: id, Object: "text_completion", Created: created, Model: h.opts.ModelName, Choices: choices, Usage: u}
	}
	ids := func(p []int32) []int32 {
		if q.ReturnTokenIDs {
			return p
		}
		return nil
	}

	if !q.Stream {
		res, e := h.generate(r.Context(), rid, g, func(piece) error { return nil })
		if e != nil {
			writeError(w, e)
			return
		}
		choices := make([]completionChoice, len(res.samples))
		for i, s := range res.samples {
			choices[i] = completionChoice{Index: i, Text: s.text.String(), TokenIDs: ids(s.ids), FinishReason: &s.finish}
			if q.ReturnTokenIDs && choices[i].TokenIDs == nil {
				choices[i].TokenIDs = []int32{}
			}
		}
		writeJSON(w, http.StatusOK, chunk(choices, newUsage(res)))
		return
	}

	out := newSSE(w)
	res, e := h.generate(r.Context(), rid, g, func(p piece) error {
		c := completionChoice{Index: p.sample, Text: p.text, TokenIDs: ids(p.ids)}
		if p.finish != "" {
			c.FinishReason = &p.finish
		}
		return out.send(chunk([]completionChoice{c}, nil))
	})
	if e != nil {
		out.fail(e)
		return
	}
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		if out.send(chunk([]completionChoice{}, newUsage(res))) != nil {
			return
		}
	}
	_ = out.raw([]byte("[DONE]"))
}

// chatChoice is one sample's result in a chat response; Delta replaces
// Message in stream chunks.
type chatChoice struct {
	Index        int       `json:"index"`
	Message      *chatOut  `json:"message,omitempty"`
	Delta        *chatOut  `json:"delta,omitempty"`
	TokenIDs     []int32   `json:"token_ids,omitempty"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type chatOut struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

// chatPrompt renders messages through the model's chat template and
// tokenizes the result. The template writes the special tokens itself, so
// no BOS is added.
func (h *Handler) chatPrompt(msgs []chatMessage) ([]int32, *apiError) {
	t := h.opts.Tokenizer
	if t == nil || !t.HasChatTemplate() {
		return nil, errBadRequest("messages", "this model has no chat template (tokenizer_config.json): use /v1/completions")
	}
	if len(msgs) == 0 {
		return nil, errBadRequest("messages", "messages is empty")
	}
	conv := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "developer", "tool":
		default:
			return nil, errBadRequest(fmt.Sprintf("messages[%d].role", i), "unknown role %q (want system, user, assistant, developer or tool)", m.Role)
		}
		text, e := messageText(m.Content, i)
		if e != nil {
			return nil, e
		}
		role := m.Role
		if role == "developer" {
			role = "system" // OpenAI's newer name for the system message
		}
		conv[i] = tokenizer.Message{Role: role, Content: text}
	}
	rendered, err := t.ApplyChatTemplate(conv, true)
	if err != nil {
		return nil, errBadRequest("messages", "chat template: %v", err)
	}
	ids := t.Encode(rendered)
	if len(ids) == 0 {
		return nil, errBadRequest("messages", "the conversation renders to an empty prompt")
	}
	return ids, nil
}

// messageText accepts a content string or an array of text parts.
func messageText(raw json.RawMessage, i int) (string, *apiError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errBadRequest(fmt.Sprintf("messages[%d].content", i), "content must be a string or an array of text parts")
	}
	var out string
	for j, p := range parts {
		if p.Type != "text" {
			return "", errBadRequest(fmt.Sprintf("messages[%d].content[%d].type", i, j), "only text parts are supported, have %q", p.Type)
		}
		out += p.Text
	}
	return out, nil
}

func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var q chatRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	var g genRequest
	if e := h.options(&q.openAIRequest, &g, h.es.ContextLimit()); e != nil {
		writeError(w, e)
		return
	}
	var e *apiError
	if g.prompt, e = h.chatPrompt(q.Messages); e != nil {
		writeError(w, e)
		return
	}
	rid := h.newID()
	id := fmt.Sprintf("chatcmpl-%d", rid)
	created := time.Now().Unix()
	resp := func(object string, choices []chatChoice, u *usage) chatResponse {
		return chatResponse{ID: id, Object: object, Created: created, Model: h.opts.ModelName, Choices: choices, Usage: u}
	}
	ids := func(p []int32) []int32 {
		if q.ReturnTokenIDs {
			return p
		}
		return nil
	}

	if !q.Stream {
		res, e := h.generate(r.Context(), rid, g, func(piece) error { return nil })
		if e != nil {
			writeError(w, e)
			return
		}
		choices := make([]chatChoice, len(res.samples))
		for i, s := range res.samples {
			text := s.text.String()
			choices[i] = chatChoice{Index: i, Message: &chatOut{Role: "assistant", Content: &text}, TokenIDs: ids(s.ids), FinishReason: &s.finish}
		}
		writeJSON(w, http.StatusOK, resp("chat.completion", choices, newUsage(res)))
		return
	}

	out := newSSE(w)
	began := make([]bool, g.n)
	res, e := h.generate(r.Context(), rid, g, func(p piece) error {
		d := &chatOut{Content: &p.text}
		if !began[p.sample] {
			began[p.sample] = true
			d.Role = "assistant"
		}
		c := chatChoice{Index: p.sample, Delta: d, TokenIDs: ids(p.ids)}
		if p.finish != "" {
			c.FinishReason = &p.finish
		}
		return out.send(resp("chat.completion.chunk", []chatChoice{c}, nil))
	})
	if e != nil {
		out.fail(e)
		return
	}
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		if out.send(resp("chat.completion.chunk", []chatChoice{}, newUsage(res))) != nil {
			return
		}
	}
	_ = out.raw([]byte("[DONE]"))
}

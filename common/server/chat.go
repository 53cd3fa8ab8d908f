package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"kvlab/common/toolcall"
)

// chatRequest is a /v1/chat/completions body.
type chatRequest struct {
	openAIRequest
	// add_generation_prompt, continue_final_message, chat_template_kwargs
	// (chattemplate.go)
	chatTemplating
	// tools, tool_choice and parallel_tool_calls (toolcalls.go)
	chatTools
	Messages []chatMessage `json:"messages"`
	// Logprobs and TopLogprobs ask for each token's logprob and the
	// top_logprobs most likely tokens at its position (logprobs.go).
	Logprobs    *bool `json:"logprobs"`
	TopLogprobs *int  `json:"top_logprobs"`
	// ReturnProgress adds llama-server's prompt_progress chunk to a
	// stream, before the first text (promptProgress).
	ReturnProgress bool `json:"return_progress"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of {"type":"text","text":...}; null beside tool_calls
	// ToolCalls are an assistant's calls (messageToolCalls); ToolCallID
	// and Name are a tool result's: the call it answers, the function.
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

// chatChoice is one sample's result in a chat response; Delta replaces
// Message in stream chunks.
type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatOut      `json:"message,omitempty"`
	Delta        *chatOut      `json:"delta,omitempty"`
	TokenIDs     []int32       `json:"token_ids,omitempty"`
	FinishReason *string       `json:"finish_reason"`
	Logprobs     *chatLogprobs `json:"logprobs"` // null unless asked
}

type chatOut struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

// MarshalJSON writes a message or delta with a role and no content as a
// stream's first delta is written: the role, and content null (an answer
// that is only tool calls has it too).
func (c chatOut) MarshalJSON() ([]byte, error) {
	type plain chatOut
	if c.Role != "" && c.Content == nil {
		return json.Marshal(struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
		}{c.Role, nil, c.ToolCalls})
	}
	return json.Marshal(plain(c))
}

type chatResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []chatChoice    `json:"choices"`
	Usage             *usage          `json:"usage,omitempty"`
	Timings           *llamaTimings   `json:"timings,omitempty"` // as completionResponse's
	Progress          *promptProgress `json:"prompt_progress,omitempty"`
	Verbose           *chatVerbose    `json:"__verbose,omitempty"` // asked with verbose (chattemplate.go)
}

// chatText renders the request's messages, and its tools when they are
// active, through the model's chat template (renderChat): the prompt
// /v1/chat/completions runs and /apply-template shows.
func (h *Handler) chatText(q *chatRequest) (string, *toolUse, *apiError) {
	tools, e := h.toolUse(&q.chatTools)
	if e != nil {
		return "", nil, e
	}
	rendered, e := h.renderChat(q.Messages, &q.chatTemplating, tools)
	return rendered, tools, e
}

// chatPrompt is chatText tokenized (chatIDs).
func (h *Handler) chatPrompt(q *chatRequest) ([]int32, *toolUse, *apiError) {
	rendered, tools, e := h.chatText(q)
	if e != nil {
		return nil, nil, e
	}
	ids := chatIDs(h.opts.Tokenizer, rendered)
	if len(ids) == 0 {
		return nil, nil, errBadRequest("messages", "the conversation renders to an empty prompt")
	}
	return ids, tools, nil
}

// messageText accepts a content string or an array of text parts, which
// it joins with a blank line between them, as llama-server does.
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
	texts := make([]string, len(parts))
	for j, p := range parts {
		if p.Type != "text" {
			return "", errBadRequest(fmt.Sprintf("messages[%d].content[%d].type", i, j), "only text parts are supported, have %q", p.Type)
		}
		texts[j] = p.Text
	}
	return strings.Join(texts, "\n\n"), nil
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
	nLogprobs, e := chatLogprobsAsked(&q, &g)
	if e != nil {
		writeError(w, e)
		return
	}
	var tools *toolUse
	if g.prompt, tools, e = h.chatPrompt(&q); e != nil {
		writeError(w, e)
		return
	}
	if e = h.constrain(tools, &g); e != nil {
		writeError(w, e)
		return
	}
	rid := h.newID()
	id := fmt.Sprintf("chatcmpl-%d", rid)
	created := time.Now().Unix()
	reply := func(object string, choices []chatChoice, u *usage, t *llamaTimings) chatResponse {
		return chatResponse{ID: id, Object: object, Created: created, Model: h.opts.ModelName, SystemFingerprint: buildInfo(), Choices: choices, Usage: u, Timings: t}
	}
	began := make([]bool, g.n)     // the first delta of each sample names the role
	var parsers []*toolcall.Stream // per sample, when tools are active
	made := make([]int, g.n)       // calls each sample has streamed
	if tools.active {
		parsers = make([]*toolcall.Stream, g.n)
		for i := range parsers {
			parsers[i] = toolcall.NewStream(tools.format)
		}
	}
	logprobs := func(ps []tokenProbs) *chatLogprobs {
		if nLogprobs < 0 {
			return nil
		}
		return h.chatLogprobsOf(ps, nLogprobs)
	}
	h.openAIReply(w, r, &q.openAIRequest, rid, g, replyShape{
		whole: func(res *genResult) any {
			choices := make([]chatChoice, len(res.samples))
			for i, s := range res.samples {
				text, finish := s.text.String(), s.finish
				msg := &chatOut{Role: "assistant", Content: &text}
				if tools.active {
					content, calls := toolcall.Parse(tools.format, text)
					msg.Content, msg.ToolCalls = nil, toolCallsOut(rid, i, 0, calls, false)
					if content != "" {
						msg.Content = &content
					}
					finish = toolFinish(finish, len(calls))
				}
				choices[i] = chatChoice{Index: i, Message: msg, TokenIDs: q.idsIfAsked(orEmpty(s.ids)), FinishReason: &finish, Logprobs: logprobs(s.probs)}
			}
			out := reply("chat.completion", choices, newUsage(res), llamaTimingsOf(res))
			if q.Verbose || h.opts.Verbose {
				out.Verbose = &chatVerbose{Prompt: promptText(h.opts.Tokenizer, g.prompt)}
			}
			return out
		},
		chunk: func(p piece) []any {
			var out []any
			var t *llamaTimings // with timings_per_token, on every chunk but the role's (as llama-server)
			if g.timingsPerToken {
				t = p.timings
			}
			if q.ReturnProgress && !slices.Contains(began, true) {
				// The prompt's progress in chunks of their own with no
				// choices, as llama-server sends it.
				for _, pr := range progressReports(p, len(g.prompt)) {
					c := reply("chat.completion.chunk", []chatChoice{}, nil, pr.timingsIf(g.timingsPerToken))
					c.Progress = pr
					out = append(out, c)
				}
			}
			if !began[p.sample] {
				// A sample's first chunk names the role and carries no
				// text (content null), as OpenAI's and llama-server's do.
				began[p.sample] = true
				out = append(out, reply("chat.completion.chunk", []chatChoice{{Index: p.sample, Delta: &chatOut{Role: "assistant"}}}, nil, nil))
			}
			// Text goes in content chunks only, none of them empty (a
			// piece the decoder or a stop string holds back whole has
			// nothing to say); the finishing chunk is llama-server's
			// "delta": {} with the finish reason.
			// With tools, text that may be part of a call is held back by
			// the sample's parser until it is known to be content; a chunk
			// with token ids or logprobs then carries empty content.
			text, calls := p.text, []toolcall.Call(nil)
			if parsers != nil {
				text, calls = parsers[p.sample].Push(p.text)
			}
			if ids := q.idsIfAsked(p.ids); text != "" || len(ids) > 0 || nLogprobs >= 0 && len(p.probs) > 0 {
				c := chatChoice{Index: p.sample, Delta: &chatOut{Content: &text}, TokenIDs: ids, Logprobs: logprobs(p.probs)}
				out = append(out, reply("chat.completion.chunk", []chatChoice{c}, nil, t))
			}
			if p.finish == "" {
				return append(out, h.callChunks(reply, rid, p.sample, made, calls, t)...)
			}
			finish := p.finish
			if parsers != nil {
				out = append(out, h.callChunks(reply, rid, p.sample, made, calls, t)...)
				rest, more := parsers[p.sample].Finish()
				if rest != "" {
					c := chatChoice{Index: p.sample, Delta: &chatOut{Content: &rest}}
					out = append(out, reply("chat.completion.chunk", []chatChoice{c}, nil, t))
				}
				out = append(out, h.callChunks(reply, rid, p.sample, made, more, t)...)
				finish = toolFinish(finish, made[p.sample])
			}
			c := chatChoice{Index: p.sample, Delta: &chatOut{}, FinishReason: &finish}
			return append(out, reply("chat.completion.chunk", []chatChoice{c}, nil, p.timings))
		},
		usage: func(res *genResult) any {
			return reply("chat.completion.chunk", []chatChoice{}, newUsage(res), llamaTimingsOf(res))
		},
	})
}

// callChunks are the stream chunks of a sample's newly completed calls,
// one chunk per call, each whole: made counts the calls each sample has
// streamed, which numbers them.
func (h *Handler) callChunks(reply func(string, []chatChoice, *usage, *llamaTimings) chatResponse, rid, sample int, made []int, calls []toolcall.Call, t *llamaTimings) []any {
	var out []any
	for _, c := range toolCallsOut(rid, sample, made[sample], calls, true) {
		ch := chatChoice{Index: sample, Delta: &chatOut{ToolCalls: []chatToolCall{c}}}
		out = append(out, reply("chat.completion.chunk", []chatChoice{ch}, nil, t))
	}
	made[sample] += len(calls)
	return out
}

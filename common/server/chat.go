package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"kvlab/common/tokenizer"
)

// chatRequest is a /v1/chat/completions body.
type chatRequest struct {
	openAIRequest
	Messages []chatMessage `json:"messages"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of {"type":"text","text":...}
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

// MarshalJSON writes a delta with a role and no content as a stream's
// first delta is written: the role, and content null.
func (c chatOut) MarshalJSON() ([]byte, error) {
	type plain chatOut
	if c.Role != "" && c.Content == nil {
		return json.Marshal(struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		}{c.Role, nil})
	}
	return json.Marshal(plain(c))
}

type chatResponse struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []chatChoice  `json:"choices"`
	Usage             *usage        `json:"usage,omitempty"`
	Timings           *llamaTimings `json:"timings,omitempty"` // as completionResponse's
}

// chatPrompt renders messages through the model's chat template and
// tokenizes the result. The template writes the special tokens itself, so
// no BOS is added.
func (h *Handler) chatPrompt(msgs []chatMessage) ([]int32, *apiError) {
	rendered, e := h.chatText(msgs)
	if e != nil {
		return nil, e
	}
	ids := h.opts.Tokenizer.Encode(rendered)
	if len(ids) == 0 {
		return nil, errBadRequest("messages", "the conversation renders to an empty prompt")
	}
	return ids, nil
}

// chatText renders messages through the model's chat template, ending
// with the header of the assistant's turn.
func (h *Handler) chatText(msgs []chatMessage) (string, *apiError) {
	t := h.opts.Tokenizer
	if t == nil || !t.HasChatTemplate() {
		return "", errBadRequest("messages", "this model has no chat template (tokenizer_config.json): use /v1/completions")
	}
	if len(msgs) == 0 {
		return "", errBadRequest("messages", "messages is empty")
	}
	conv := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "developer", "tool":
		default:
			return "", errBadRequest(fmt.Sprintf("messages[%d].role", i), "unknown role %q (want system, user, assistant, developer or tool)", m.Role)
		}
		text, e := messageText(m.Content, i)
		if e != nil {
			return "", e
		}
		role := m.Role
		if role == "developer" {
			role = "system" // OpenAI's newer name for the system message
		}
		conv[i] = tokenizer.Message{Role: role, Content: text}
	}
	rendered, err := t.ApplyChatTemplate(conv, true)
	if err != nil {
		return "", errBadRequest("messages", "chat template: %v", err)
	}
	return rendered, nil
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
	reply := func(object string, choices []chatChoice, u *usage, t *llamaTimings) chatResponse {
		return chatResponse{ID: id, Object: object, Created: created, Model: h.opts.ModelName, SystemFingerprint: buildInfo(), Choices: choices, Usage: u, Timings: t}
	}
	began := make([]bool, g.n) // the first delta of each sample names the role
	h.openAIReply(w, r, &q.openAIRequest, rid, g, replyShape{
		whole: func(res *genResult) any {
			choices := make([]chatChoice, len(res.samples))
			for i, s := range res.samples {
				text := s.text.String()
				choices[i] = chatChoice{Index: i, Message: &chatOut{Role: "assistant", Content: &text}, TokenIDs: q.idsIfAsked(orEmpty(s.ids)), FinishReason: &s.finish}
			}
			return reply("chat.completion", choices, newUsage(res), llamaTimingsOf(res))
		},
		chunk: func(p piece) []any {
			var out []any
			if !began[p.sample] {
				// A sample's first chunk names the role and carries no
				// text (content null), as OpenAI's and llama-server's do.
				began[p.sample] = true
				out = append(out, reply("chat.completion.chunk", []chatChoice{{Index: p.sample, Delta: &chatOut{Role: "assistant"}}}, nil, nil))
			}
			c := chatChoice{Index: p.sample, Delta: &chatOut{Content: &p.text}, TokenIDs: q.idsIfAsked(p.ids)}
			if p.finish != "" {
				c.FinishReason = &p.finish
			}
			return append(out, reply("chat.completion.chunk", []chatChoice{c}, nil, p.timings))
		},
		usage: func(res *genResult) any {
			return reply("chat.completion.chunk", []chatChoice{}, newUsage(res), llamaTimingsOf(res))
		},
	})
}

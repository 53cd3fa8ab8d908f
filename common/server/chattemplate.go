package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"kvlab/common/tokenizer"
	"kvlab/common/toolcall"
)

// chatTemplating are a chat body's fields about how its messages render,
// as llama-server reads them: add_generation_prompt (default true: end
// with the header of the assistant's turn), continue_final_message (true
// or "content": the last message is the start of the assistant's answer,
// which generation continues; vLLM's and transformers' name), and
// chat_template_kwargs (further template variables, such as
// enable_thinking).
type chatTemplating struct {
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage json.RawMessage `json:"continue_final_message"`
	ChatTemplateKwargs   map[string]any  `json:"chat_template_kwargs"`
	// Verbose asks for llama-server's "__verbose" in a chat answer (as
	// Options.Verbose does for every answer): here, the rendered prompt.
	Verbose bool `json:"verbose"`
}

// chatVerbose is a chat answer's "__verbose": llama-server puts its whole
// internal result there; the prompt is the part clients read, to see what
// the template made of the conversation.
type chatVerbose struct {
	Prompt string `json:"prompt"`
}

// promptText is the text of a prompt's ids as llama-server writes it in
// __verbose: each token's piece, BOS included, in valid UTF-8.
func promptText(t *tokenizer.Tokenizer, ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = append(b, t.Piece(id)...)
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

// applyTemplateRequest is POST /apply-template's body: a chat body, whose
// prompt it renders as /v1/chat/completions renders it, tools included.
type applyTemplateRequest struct {
	chatRequest
}

// continuation reads continue_final_message: absent, null or false is
// none; true and "content" continue the last message's content.
func (c *chatTemplating) continuation() (bool, *apiError) {
	raw := bytes.TrimSpace(c.ContinueFinalMessage)
	switch string(raw) {
	case "", "null", "false":
		return false, nil
	case "true", `"content"`:
		return true, nil
	case `"reasoning_content"`:
		return false, errBadRequest("continue_final_message", `continue_final_message "reasoning_content" is not supported: messages carry no reasoning_content here`)
	}
	return false, errBadRequest("continue_final_message", "continue_final_message must be true, false or \"content\", have %s", clip(raw))
}

// renderChat renders the conversation with the chat template, as
// llama-server builds a chat prompt. A last assistant message is an
// assistant prefill: the conversation before it is rendered with the
// header of the assistant's turn and the message's content follows, left
// open (no end-of-turn), so that generation continues it and the answer is
// only the continuation. The same holds for continue_final_message, which
// needs add_generation_prompt false. Active tools (toolUse) are given to
// the template, and described in the system message when the template
// cannot render them (toolcall.Generic).
func (h *Handler) renderChat(msgs []chatMessage, tpl *chatTemplating, tools *toolUse) (string, *apiError) {
	t := h.opts.Tokenizer
	if t == nil || !t.HasChatTemplate() {
		return "", errBadRequest("messages", "this model has no chat template (tokenizer_config.json or -chat-template): use /v1/completions")
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
		text, e := "", (*apiError)(nil)
		if given(m.Content) || !given(m.ToolCalls) { // an assistant's calls may come without content
			text, e = messageText(m.Content, i)
		}
		if e != nil {
			return "", e
		}
		role := m.Role
		if role == "developer" {
			role = "system" // OpenAI's newer name for the system message
		}
		calls, e := messageToolCalls(m.ToolCalls, i)
		if e != nil {
			return "", e
		}
		if calls != nil && role != "assistant" {
			return "", errBadRequest(fmt.Sprintf("messages[%d].tool_calls", i), "only an assistant message has tool_calls, and messages[%d] is the %s's", i, role)
		}
		conv[i] = tokenizer.Message{Role: role, Content: text, ToolCalls: calls, ToolCallID: m.ToolCallID, Name: m.Name}
	}
	var toolList []any
	if tools != nil && tools.active {
		toolList = tools.decoded
		conv = withToolPrompt(conv, toolcall.SystemPrompt(tools.format, tools.tools, tools.parallel))
	}
	addGen := tpl.AddGenerationPrompt == nil || *tpl.AddGenerationPrompt
	cont, e := tpl.continuation()
	if e != nil {
		return "", e
	}
	last := len(conv) - 1
	if !cont && conv[last].Role == "assistant" {
		if last > 0 && conv[last-1].Role == "assistant" {
			return "", errBadRequest("messages", "Cannot have 2 or more assistant messages at the end of the list.")
		}
		cont, addGen = true, false // the prefill overrides add_generation_prompt
	}
	if cont && addGen {
		return "", errBadRequest("add_generation_prompt", "Cannot set both add_generation_prompt and continue_final_message to true.")
	}
	if cont && conv[last].Role != "assistant" {
		return "", errBadRequest("continue_final_message", "continue_final_message continues the assistant's message, and the last message is the %s's", conv[last].Role)
	}
	if cont && conv[last].ToolCalls != nil {
		// A prefill is continued as text: its calls would be dropped.
		return "", errBadRequest(fmt.Sprintf("messages[%d].tool_calls", len(msgs)-1), "the last message is an assistant prefill, which generation continues as text, and cannot carry tool_calls; end the conversation with the tool results")
	}
	vars, e := templateVars(tpl.ChatTemplateKwargs)
	if e != nil {
		return "", e
	}
	o := tokenizer.ChatOptions{AddGenerationPrompt: addGen, Tools: toolList, Vars: vars}
	if !cont {
		out, err := t.RenderChat(conv, o)
		if err != nil {
			return "", errBadRequest("messages", "chat template: %v", err)
		}
		return out, nil
	}
	o.AddGenerationPrompt = true
	out, err := t.RenderChat(conv[:last], o)
	if err != nil {
		return "", errBadRequest("messages", "chat template: %v", err)
	}
	return out + conv[last].Content, nil
}

// templateVars checks chat_template_kwargs: enable_thinking, the one
// llama-server reads itself, must be a boolean.
func templateVars(kw map[string]any) (map[string]any, *apiError) {
	if v, ok := kw["enable_thinking"]; ok {
		kind := "a " + fmt.Sprintf("%T", v)
		switch v.(type) {
		case bool:
			return kw, nil
		case string:
			kind = "string"
		case float64:
			kind = "number"
		case nil:
			kind = "null"
		}
		return nil, errBadRequest("chat_template_kwargs.enable_thinking", `invalid type for "enable_thinking" (expected boolean, got %s)`, kind)
	}
	return kw, nil
}

// withToolPrompt puts the text describing the tools into the system
// message: after a blank line in the first message when it is the
// system's, else as a system message of its own before the others.
func withToolPrompt(conv []tokenizer.Message, prompt string) []tokenizer.Message {
	if prompt == "" {
		return conv
	}
	if conv[0].Role == "system" {
		out := slices.Clone(conv)
		if out[0].Content == "" {
			out[0].Content = prompt
		} else {
			out[0].Content += "\n\n" + prompt
		}
		return out
	}
	return append([]tokenizer.Message{{Role: "system", Content: prompt}}, conv...)
}

// chatIDs encodes a rendered chat prompt as llama-server does: the
// template's special tokens written out become their ids, and a tokenizer
// that puts BOS before a prompt puts it before this one too, once — the
// built-in formats and many templates write none, and one written by the
// template (bos_token) is not doubled.
func chatIDs(t *tokenizer.Tokenizer, rendered string) []int32 {
	ids := t.Encode(rendered)
	bos, ok := t.BOS()
	if pre := t.EncodePrompt(""); ok && len(pre) > 0 && pre[0] == bos && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}

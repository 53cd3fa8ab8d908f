package server

import (
	"bytes"
	"encoding/json"
	"fmt"

	"kvlab/common/tokenizer"
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
// tools are rendered into the prompt as the template describes them
// (nothing parses tool calls: /v1/chat/completions refuses tools).
type applyTemplateRequest struct {
	chatRequest
	Tools json.RawMessage `json:"tools"`
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
// needs add_generation_prompt false. tools, when not nil, is rendered into
// the prompt (/apply-template).
func (h *Handler) renderChat(msgs []chatMessage, tpl *chatTemplating, tools []any) (string, *apiError) {
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
	vars, e := templateVars(tpl.ChatTemplateKwargs)
	if e != nil {
		return "", e
	}
	o := tokenizer.ChatOptions{AddGenerationPrompt: addGen, Tools: tools, Vars: vars}
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

// decodeTools reads /apply-template's tools: null or absent is none, else
// an array of tool objects.
func decodeTools(raw json.RawMessage) ([]any, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	tools := []any{}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, errBadRequest("tools", "tools must be an array of tool objects")
	}
	return tools, nil
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

package server

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"sync"
)

// props serves GET /props: llama-server's description of itself. What
// this server has no counterpart for is reported as absent or off: no
// images, audio or video, no web UI, nothing to change through POST
// /props.
func (h *Handler) props(w http.ResponseWriter, r *http.Request) {
	def, d := offSettings(), llamaDefaults()
	def.Temperature, def.TopP = d.Temperature, d.TopP
	out := map[string]any{
		"default_generation_settings": map[string]any{"params": def, "n_ctx": h.es.ContextLimit()},
		"total_slots":                 len(h.slots.slots),
		"model_alias":                 h.opts.ModelName,
		"model_path":                  h.opts.ModelPath,
		"model_ftype":                 h.opts.ModelInfo.FType,
		"n_ctx":                       h.es.ContextLimit(),
		"modalities":                  map[string]bool{"vision": false, "video": false, "audio": false},
		"media_marker":                "",
		"endpoint_slots":              !h.opts.NoSlots,
		"endpoint_props":              false,
		"endpoint_metrics":            !h.opts.NoMetrics,
		"ui":                          false,
		"ui_settings":                 map[string]any{},
		"chat_template":               "",
		"chat_template_caps":          templateCaps(),
		"bos_token":                   "",
		"eos_token":                   "",
		"build_info":                  buildInfo(),
		"is_sleeping":                 false,
		"cors_proxy_enabled":          false,
	}
	if t := h.opts.Tokenizer; t != nil {
		out["chat_template"] = t.ChatTemplate()
		if id, ok := t.BOS(); ok {
			out["bos_token"] = string(t.Piece(id))
		}
		if eos := t.EOS(); len(eos) > 0 {
			out["eos_token"] = string(t.Piece(eos[0]))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// templateCaps are llama-server's chat_template_caps as they hold here:
// messages are plain text or text parts, with a system role; tools and
// tool calls, one or several per answer, whatever the template (one that
// cannot render tools has them described in the system message:
// toolcall.Generic); arguments reach the template as objects, but a
// template is not asked whether it takes them so.
func templateCaps() map[string]bool {
	return map[string]bool{
		"supports_system_role": true, "supports_string_content": true, "supports_typed_content": true,
		"supports_tools": true, "supports_tool_calls": true, "supports_parallel_tool_calls": true,
		"supports_object_arguments": false, "supports_preserve_reasoning": false, "supports_reasoning_effort": false,
	}
}

// buildInfo is this binary's build in llama-server's form b<build>-<commit>:
// /props' build_info and the OpenAI answers' system_fingerprint. The
// project numbers no builds, so the build is always b0; the commit is the
// one Go recorded (vcs.revision, cut to 7 digits), "unknown" when it
// recorded none (go run outside a checkout, a test binary).
var buildInfo = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				return "b0-" + s.Value[:7]
			}
		}
	}
	return "b0-unknown"
})

// tokenizeRequest is POST /tokenize's body. Content is a string, or an
// array mixing strings and token ids (llama-server's "mixed" prompt).
type tokenizeRequest struct {
	Content    json.RawMessage `json:"content"`
	AddSpecial bool            `json:"add_special"`
	WithPieces bool            `json:"with_pieces"`
}

// tokenize serves POST /tokenize: {"tokens": [ids]}, or with with_pieces
// [{"id", "piece"}], a piece being the token's text, or its bytes as an
// array of numbers when they are not valid UTF-8 on their own (part of a
// character), as llama-server writes them. The answer is written as it is
// made (textstream.go), by at most Options.MaxTextRequests at once
// (textgate.go).
func (h *Handler) tokenize(w http.ResponseWriter, r *http.Request) {
	var q tokenizeRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	if h.opts.Tokenizer == nil {
		writeError(w, errBadRequest("content", "this model has no tokenizer.json: it takes token ids only"))
		return
	}
	if !h.enterText(w, r) {
		return
	}
	defer h.leaveText()
	if h.opts.hooks.text != nil {
		h.opts.hooks.text()
	}
	ids, e := h.tokenizeContent(q.Content, q.AddSpecial)
	if e != nil {
		writeError(w, e)
		return
	}
	_ = h.writeTokens(h.deadlines(w), ids, q.WithPieces) // the client may be gone; nothing to do then
}

// tokenizeContent turns /tokenize's content into token ids: a string, or
// an array of strings (each tokenized on its own) and token ids, with BOS
// in front when addSpecial asks and the model has one.
func (h *Handler) tokenizeContent(content json.RawMessage, addSpecial bool) ([]int32, *apiError) {
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	if e := checkNesting(content, "content", maxContentNesting); e != nil {
		return nil, e
	}
	t := h.opts.Tokenizer
	var parts []json.RawMessage
	if json.Unmarshal(content, &parts) != nil {
		parts = []json.RawMessage{content}
	}
	var ids []int32
	for i, p := range parts {
		var text string
		var id int32
		switch {
		case json.Unmarshal(p, &text) == nil:
			ids = append(ids, t.Encode(text)...)
		case json.Unmarshal(p, &id) == nil:
			ids = append(ids, id)
		default:
			return nil, errBadRequest("content", "content must be a string or an array of strings and token ids; element %d is %s", i, clip(p))
		}
	}
	if addSpecial {
		if bos, ok := t.BOS(); ok && (len(ids) == 0 || ids[0] != bos) {
			ids = append([]int32{bos}, ids...)
		}
	}
	return ids, nil
}

// clip is raw cut to a length an error message can quote.
func clip(raw json.RawMessage) string {
	const most = 64
	if len(raw) <= most {
		return string(raw)
	}
	return string(raw[:most]) + "…"
}

// detokenize serves POST /detokenize: the text of the ids, special tokens
// written out, as llama-server's does; written as it is made, as
// /tokenize's answer is.
// detokenizeRequest is a /detokenize body: llama-server's one field.
type detokenizeRequest struct {
	Tokens []int32 `json:"tokens"`
}

func (h *Handler) detokenize(w http.ResponseWriter, r *http.Request) {
	var q detokenizeRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	if h.opts.Tokenizer == nil {
		writeError(w, errBadRequest("tokens", "this model has no tokenizer.json: there is no text to give"))
		return
	}
	if !h.enterText(w, r) {
		return
	}
	defer h.leaveText()
	if h.opts.hooks.text != nil {
		h.opts.hooks.text()
	}
	_ = h.writeText(h.deadlines(w), q.Tokens) // the client may be gone; nothing to do then
}

// applyTemplate serves POST /apply-template: the prompt a chat request's
// messages render to (renderChat: add_generation_prompt, assistant
// prefill, continue_final_message, chat_template_kwargs, and tools as a
// chat request renders them: chatText), without generating.
// chatInputTokens is POST /v1/chat/completions/input_tokens: how many
// tokens a chat request's prompt is, rendered by the chat template as
// /v1/chat/completions would render it, without running it; llama-server's
// {"input_tokens": n, "object": "response.input_tokens"}. The body is a
// chat request's, with its fields' rules: a client counts what it will send.
func (h *Handler) chatInputTokens(w http.ResponseWriter, r *http.Request) {
	var q chatRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	if e := h.checkModel(q.Model); e != nil {
		writeError(w, e)
		return
	}
	ids, _, e := h.chatPrompt(&q)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": len(ids), "object": "response.input_tokens"})
}

func (h *Handler) applyTemplate(w http.ResponseWriter, r *http.Request) {
	var q applyTemplateRequest
	if e := decodeBody(w, r, h.opts.MaxBodyBytes, &q); e != nil {
		writeError(w, e)
		return
	}
	text, _, e := h.chatText(&q.chatRequest)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text})
}

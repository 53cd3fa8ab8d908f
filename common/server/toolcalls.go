package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"kvlab/common/grammar"
	"kvlab/common/toolcall"
)

// chatTools are a chat body's tool fields, as OpenAI defines them:
// tools (function tools), tool_choice ("none", "auto", "required" or
// {"type":"function","function":{"name"}}) and parallel_tool_calls
// (default false, as on llama-server: one call per answer).
type chatTools struct {
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
}

// toolUse is what a chat request's tool fields ask for, read once per
// request.
type toolUse struct {
	// active: tools were sent and tool_choice is not "none". Only then are
	// tools rendered and answers parsed: "none" is an answer that may not
	// call, and a prompt that offers tools invites the model to call
	// anyway, leaving text that reads as a call in an answer that may
	// have none.
	active   bool
	format   toolcall.Format
	tools    []toolcall.Tool
	decoded  []any // the tools as JSON values, for the template
	choice   toolcall.Choice
	parallel bool
}

// toolUse reads q's tool fields: tools and tool_choice are checked even
// when tool_choice is "none", so a request that is wrong is refused
// whatever it chooses.
func (h *Handler) toolUse(q *chatTools) (*toolUse, *apiError) {
	u := &toolUse{parallel: q.ParallelToolCalls != nil && *q.ParallelToolCalls}
	if given(q.Tools) {
		raw := bytes.TrimSpace(q.Tools)
		if raw[0] != '[' {
			return nil, errBadRequest("tools", "tools must be an array of tool objects, have %s", clip(raw))
		}
		tools, err := toolcall.ParseTools(raw)
		if err != nil {
			return nil, toolFieldError("tools", err)
		}
		u.tools = tools
		if err := json.Unmarshal(raw, &u.decoded); err != nil {
			return nil, errBadRequest("tools", "tools must be an array of tool objects")
		}
	}
	choice, err := toolcall.ParseChoice(q.ToolChoice, u.tools)
	if err != nil {
		return nil, toolFieldError("tool_choice", err)
	}
	u.choice = choice
	u.active = len(u.tools) > 0 && choice.Mode != "none"
	if u.active && h.opts.Tokenizer != nil {
		u.format = toolcall.Detect(h.opts.Tokenizer.ChatTemplate()) // a few substring tests: cheaper than keeping it
	}
	return u, nil
}

// constrain sets g's grammar to the one that makes every answer a call,
// when tool_choice asks for one ("required" or a named function); "auto"
// leaves the answer free, since a grammar that allowed either text or a
// call would still have to let text start the answer, and free text may
// start like a call. Tools do not combine with the structured-output
// fields: both would constrain the same answer.
func (h *Handler) constrain(u *toolUse, g *genRequest) *apiError {
	if !u.active {
		return nil
	}
	if g.grammar != nil {
		return errBadRequest(g.grammarField, "tools cannot be combined with %s: both constrain the answer; send one", g.grammarField)
	}
	src, err := toolcall.Grammar(u.format, u.tools, u.choice, u.parallel)
	if err != nil { // a parameters schema the converter refuses
		return toolFieldError("tools", err)
	}
	if src == "" {
		return nil
	}
	gr, err := grammar.Parse(src)
	if err != nil { // the grammar is written here, from checked tools: a bug
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal_error", Param: "tools",
			Message: "tools: the grammar written for the tool calls does not parse: " + err.Error()}
	}
	g.grammar, g.grammarSrc = gr, src
	return nil
}

// toolFieldError is a 400 for err, whose message starts with the path of
// the part it is about (tools[1].function.name: ...): the param names that
// path when it is inside field, else field.
func toolFieldError(field string, err error) *apiError {
	msg := err.Error()
	param := field
	if path, _, ok := strings.Cut(msg, ":"); ok && (path == field || strings.HasPrefix(path, field+"[") || strings.HasPrefix(path, field+".")) && !strings.ContainsAny(path, " \"") {
		param = path
	}
	return errBadRequest(param, "%s", msg)
}

// chatToolCall is one call in an answer: OpenAI's
// {"id", "type": "function", "function": {"name", "arguments"}}, with
// "index" in a stream's delta (which call of the sample it is).
type chatToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallsOut writes calls as an answer's tool_calls; first is the
// sample's number of calls before them, which makes each id unique within
// the response, and the request id rid unique across requests.
func toolCallsOut(rid, sample, first int, calls []toolcall.Call, streamed bool) []chatToolCall {
	out := make([]chatToolCall, len(calls))
	for k, c := range calls {
		o := &out[k]
		o.ID, o.Type = fmt.Sprintf("call_%d_%d_%d", rid, sample, first+k), "function"
		o.Function.Name, o.Function.Arguments = c.Name, c.Arguments
		if streamed {
			i := first + k
			o.Index = &i
		}
	}
	return out
}

// toolFinish is the finish reason of a sample that made calls: a call
// ends the answer as the model meant it to ("stop") only when it did not
// run out of tokens.
func toolFinish(finish string, calls int) string {
	if calls > 0 && finish == "stop" {
		return "tool_calls"
	}
	return finish
}

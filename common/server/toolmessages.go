package server

import (
	"encoding/json"
	"fmt"
)

// messageToolCalls reads messages[i].tool_calls, an assistant's earlier
// calls, into what a template reads: each call as a JSON object whose
// function.arguments is the arguments object, not the JSON text OpenAI
// sends (templates such as Llama-3's write it with "| tojson", and a
// string would come out quoted twice). Arguments sent as an object are
// taken as they are.
func messageToolCalls(raw json.RawMessage, i int) ([]any, *apiError) {
	if !given(raw) {
		return nil, nil
	}
	at := fmt.Sprintf("messages[%d].tool_calls", i)
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errBadRequest(at, "%s must be an array of tool calls", at)
	}
	out := make([]any, len(list))
	for j, item := range list {
		at := fmt.Sprintf("%s[%d]", at, j)
		var c struct {
			ID       string          `json:"id"`
			Type     *string         `json:"type"`
			Function json.RawMessage `json:"function"`
		}
		if err := json.Unmarshal(item, &c); err != nil {
			return nil, errBadRequest(at, `%s must be an object {"id", "type": "function", "function": {"name", "arguments"}}`, at)
		}
		if c.Type != nil && *c.Type != "function" {
			return nil, errBadRequest(at+".type", `%s.type must be "function", have %q`, at, *c.Type)
		}
		var f struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if !given(c.Function) || json.Unmarshal(c.Function, &f) != nil {
			return nil, errBadRequest(at+".function", `%s.function must be an object {"name", "arguments"}`, at)
		}
		if f.Name == nil || *f.Name == "" {
			return nil, errBadRequest(at+".function.name", "%s.function.name is required", at)
		}
		args, e := callArguments(f.Arguments, at+".function.arguments")
		if e != nil {
			return nil, e
		}
		out[j] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": *f.Name, "arguments": args}}
	}
	return out, nil
}

// callArguments decodes a call's arguments: a JSON object, or a string
// holding one (OpenAI's form); absent or empty is no arguments.
func callArguments(raw json.RawMessage, at string) (map[string]any, *apiError) {
	if !given(raw) {
		return map[string]any{}, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return map[string]any{}, nil
		}
		raw = json.RawMessage(text)
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, errBadRequest(at, "%s must be a JSON object, or a string holding one, have %s", at, clip(raw))
	}
	return args, nil
}

package server

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
)

// promptStrings replaces llama-server's multimodal prompt objects in raw,
// {"prompt_string": "..."} at the top or as an element of the top-level
// array, with their text. multimodal_data, or any other key of such an
// object, is a 400 naming it: this server's models take text only.
func promptStrings(raw json.RawMessage) (json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		return promptString(raw, "prompt")
	}
	var elems []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
		return raw, nil
	}
	changed := false
	for i, el := range elems {
		el = bytes.TrimSpace(el)
		if len(el) == 0 || el[0] != '{' {
			continue
		}
		s, e := promptString(el, "prompt["+strconv.Itoa(i)+"]")
		if e != nil {
			return nil, e
		}
		elems[i], changed = s, true
	}
	if !changed {
		return raw, nil
	}
	out, err := json.Marshal(elems)
	if err != nil {
		return nil, errInvalidJSON("prompt", "prompt: %v", err)
	}
	return out, nil
}

// promptString reads one {"prompt_string": ...} object at param and
// returns its text as a JSON string.
func promptString(raw json.RawMessage, param string) (json.RawMessage, *apiError) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errInvalidJSON(param, "%s must be a string, token ids or {\"prompt_string\": ...}: %v", param, err)
	}
	if _, ok := obj["multimodal_data"]; ok {
		return nil, errUnsupportedPrompt(param+".multimodal_data", "%s.multimodal_data is not supported: this server's models take text only", param)
	}
	text, ok := obj["prompt_string"]
	if !ok {
		return nil, errBadRequest(param, "%s must be a string, token ids, or an object with prompt_string", param)
	}
	if s := ""; json.Unmarshal(text, &s) != nil {
		return nil, errBadRequest(param+".prompt_string", "%s.prompt_string must be a string", param)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "prompt_string" {
			return nil, errUnsupportedPrompt(param+"."+k, "%s.%s is not supported: a prompt object takes prompt_string only", param, k)
		}
	}
	return text, nil
}

// errUnsupportedPrompt is the 400 for a prompt part this server does not
// take.
func errUnsupportedPrompt(param, format string, args ...any) *apiError {
	e := errBadRequest(param, format, args...)
	e.Code = "unsupported_parameter"
	return e
}

// completionPrompts reads /v1/completions' prompt: one prompt (a string,
// token ids, prompt_string objects) or, as OpenAI's API allows, an array
// of them, each its own generation. An array of numbers is one prompt of
// token ids; an array whose every element is a string, an array or an
// object is a batch.
func (h *Handler) completionPrompts(raw json.RawMessage) ([][]int32, *apiError) {
	if e := checkNesting(raw, "prompt", maxPromptNesting); e != nil {
		return nil, e
	}
	raw, e := promptStrings(raw)
	if e != nil {
		return nil, e
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil || len(elems) < 2 || !allPrompts(elems) {
		p, e := h.prompt(raw)
		return [][]int32{p}, e
	}
	out := make([][]int32, len(elems))
	for i, el := range elems {
		if out[i], e = h.prompt(el); e != nil {
			e.Message = "prompt " + strconv.Itoa(i) + ": " + e.Message
			return nil, e
		}
	}
	return out, nil
}

// allPrompts reports whether every element is a string or an array: a
// batch of prompts rather than token ids.
func allPrompts(elems []json.RawMessage) bool {
	for _, el := range elems {
		if el = bytes.TrimSpace(el); len(el) == 0 || el[0] != '"' && el[0] != '[' {
			return false
		}
	}
	return true
}

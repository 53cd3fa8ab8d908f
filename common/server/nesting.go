package server

import (
	"encoding/json"
	"strings"
)

// A prompt is at most two levels of arrays deep: OpenAI's and vLLM's
// prompt is a string, an array of strings, an array of token ids or an
// array of such arrays; llama-server's /completion (tokenize_input_prompts)
// takes a string, token ids, a mix of both, or an array of any of these;
// /tokenize's content is a string or one mixed array. Anything deeper is
// refused before its value is decoded: a prompt reader that tries each
// shape in turn re-reads the whole value at every level, so a 20 KB body
// of nested one-element arrays (9,990 deep) cost seconds of CPU, the
// depth times the size.
const (
	maxPromptNesting  = 2
	maxContentNesting = 1
)

// nestingLimits is what a request body type implements to have
// decodeBody refuse fields nested too deep before decoding them: the most
// levels of arrays and objects each top-level field's value may hold
// (0: a scalar). Fields are matched as encoding/json matches them, without
// regard to case.
type nestingLimits interface {
	nestingLimits() map[string]int
}

func (completionRequest) nestingLimits() map[string]int {
	return map[string]int{"prompt": maxPromptNesting}
}

func (llamaRequest) nestingLimits() map[string]int {
	return map[string]int{"prompt": maxPromptNesting}
}

func (tokenizeRequest) nestingLimits() map[string]int {
	return map[string]int{"content": maxContentNesting}
}

// checkBodyNesting scans body once, without decoding it, and refuses the
// first top-level field whose value nests deeper than limits allows, with
// a 400 naming it. It stops at the first bracket too deep, so a body of
// ten thousand brackets costs no more than its first few. A body that is
// not a JSON object, or not JSON, passes: decoding refuses it.
func checkBodyNesting(body []byte, limits map[string]int) *apiError {
	depth := 0
	inString, escaped := false, false
	keyStart, lastString := 0, []byte(nil) // the last string closed at depth 1, quotes included
	field, limit := "", -1                 // the field whose value is being read; -1: no limit
	for i, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				if depth == 1 {
					lastString = body[keyStart : i+1]
				}
			}
			continue
		}
		switch c {
		case '"':
			inString, keyStart = true, i
		case ':':
			if depth == 1 {
				field, limit = limitOf(lastString, limits)
			}
		case '[', '{':
			depth++
			if depth == 1 && c != '{' {
				return nil // not an object
			}
			if limit >= 0 && depth-1 > limit {
				return errNesting(field, limit)
			}
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				field, limit = "", -1
			}
		}
	}
	return nil
}

// limitOf finds the limit of the field whose quoted name is key: the
// first field of limits that key names, ignoring case as encoding/json
// does; -1 when none.
func limitOf(key []byte, limits map[string]int) (string, int) {
	var name string
	if json.Unmarshal(key, &name) != nil {
		return "", -1
	}
	for f, n := range limits {
		if strings.EqualFold(f, name) {
			return f, n
		}
	}
	return "", -1
}

// checkNesting refuses a decoded field's value nested deeper than limit,
// as checkBodyNesting does: what guards the prompt readers whatever way
// the value reached them.
func checkNesting(raw json.RawMessage, field string, limit int) *apiError {
	depth := 0
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return errNesting(field, limit)
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// errNesting is the 400 for a field nested deeper than its shapes allow.
func errNesting(field string, limit int) *apiError {
	shapes := map[string]string{
		"prompt":  "a string, an array of token ids, or an array of those (at most 2 levels of arrays)",
		"content": "a string, or one array of strings and token ids (1 level of arrays)",
	}[field]
	e := errBadRequest(field, "%s nests arrays more than %d deep; it must be %s", field, limit, shapes)
	e.Code = "too_deep"
	return e
}

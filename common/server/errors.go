package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// apiError is an error in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}}, sent with Status.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
	// NPromptTokens and NCtx are llama-server's additions to its
	// exceed_context_size_error: the request's tokens and the context one
	// sequence can hold (errContext).
	NPromptTokens int `json:"n_prompt_tokens,omitempty"`
	NCtx          int `json:"n_ctx,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// errBadRequest is a 400 for a field with a bad value (code
// "invalid_value"); the callers for other kinds of 400 set their own code.
func errBadRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value", Param: param, Message: fmt.Sprintf(format, args...)}
}

// errInvalidJSON is a 400 for a body that is not the JSON asked for.
func errInvalidJSON(param, format string, args ...any) *apiError {
	e := errBadRequest(param, format, args...)
	e.Code = "invalid_json"
	return e
}

func errNotFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, map[string]*apiError{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}

// decodeBody reads r's JSON body into v, bounded by limit bytes. It turns
// every way a body can be wrong into the error a client can act on: 413
// for a body over the limit, 400 for malformed JSON or a field of the wrong
// type (naming the field), 400 for a field nested deeper than v allows
// (nestingLimits) before anything is decoded. Unknown fields are ignored,
// as OpenAI-compatible servers do: clients send many optional ones.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large", Message: fmt.Sprintf("request body is over the limit of %d bytes", tooBig.Limit)}
	case err != nil:
		return errInvalidJSON("", "reading the request body: %v", err)
	case len(body) == 0:
		return errInvalidJSON("", "empty request body; want a JSON object")
	}
	// JSON is UTF-8 (RFC 8259). encoding/json would replace each bad byte
	// with U+FFFD, three bytes that tokenize to as many tokens, so a body
	// could cost three times its size; llama-server's parser refuses it.
	if !utf8.Valid(body) {
		return errInvalidJSON("", "the request body is not UTF-8: a bad byte at offset %d", firstInvalidUTF8(body))
	}
	if nl, ok := v.(nestingLimits); ok {
		if e := checkBodyNesting(body, nl.nestingLimits()); e != nil {
			return e
		}
	}
	if fc, ok := v.(fieldChecked); ok { // fields.go
		if e := checkFields(body, v, fc.fieldRules()); e != nil {
			return e
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			if typ.Field == "" { // the body itself
				return errInvalidJSON("", "the request body must be a JSON object, have a JSON %s", typ.Value)
			}
			// Fields of embedded structs are reported with the struct's
			// name in front, which means nothing to a client.
			typ.Field = strings.TrimPrefix(typ.Field, "openAIRequest.")
			return errInvalidJSON(typ.Field, "field %q must be %s, have a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return errInvalidJSON("", "malformed JSON: %v", err)
	}
	return nil
}

// firstInvalidUTF8 is the offset of the first byte of body that does not
// start a valid UTF-8 sequence, or len(body) if there is none.
func firstInvalidUTF8(body []byte) int {
	for i := 0; i < len(body); {
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(body)
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(k string) string {
	switch k {
	case "int", "int32", "int64", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "a value of another type"
	}
	return k
}

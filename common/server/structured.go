package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"kvlab/common/engine"
	"kvlab/common/grammar"
	"kvlab/common/grammar/jsonschema"
	"kvlab/common/grammar/tokens"
)

// structuredFields are the request fields that constrain a generation's
// text to a language (structured output), on every generation endpoint as
// on llama-server: grammar is llama.cpp's GBNF, json_schema a JSON schema
// converted to GBNF as llama.cpp converts it.
type structuredFields struct {
	Grammar    string          `json:"grammar"`
	JSONSchema json.RawMessage `json:"json_schema"`
}

// responseFormat is OpenAI's response_format, on the /v1 endpoints:
// {"type":"text"} (free), {"type":"json_object"} (any JSON object, or the
// "schema" given beside it, as llama-server takes it) or
// {"type":"json_schema","json_schema":{"schema":...}}.
type responseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// grammarVocab is the tokenizer's vocabulary prepared for grammar masks,
// built by the first request with a grammar (a walk over every token) and
// shared by all after it.
type grammarVocab struct {
	once sync.Once
	v    *tokens.Vocab
}

// structured reads the structured-output fields into g (format is the
// /v1 endpoints' response_format, nil elsewhere): the grammar is parsed
// here, once per request, and each sample gets its own matcher at Submit
// (constraint). A grammar that does not parse is a 400 naming the field
// and the line and column; a schema keyword the converter does not
// support is a 400 naming it and its JSON pointer.
func (h *Handler) structured(q *structuredFields, format json.RawMessage, g *genRequest) *apiError {
	src, field, e := structuredSource(q, format)
	if e != nil || field == "" {
		return e
	}
	if h.opts.Tokenizer == nil {
		return errBadRequest(field, "%s needs the model's tokenizer, and this server has none", field)
	}
	gr, err := grammar.Parse(src)
	switch {
	case err != nil && field == "grammar":
		var se *grammar.SyntaxError
		if errors.As(err, &se) {
			return errBadRequest(field, "grammar: %v", se)
		}
		return errBadRequest(field, "grammar: %v", err)
	case err != nil: // the converter wrote a grammar that does not parse: a bug here
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Code: "internal_error", Param: field,
			Message: field + ": the grammar converted from the schema does not parse: " + err.Error()}
	}
	g.grammar, g.grammarSrc, g.grammarField = gr, src, field
	return nil
}

// structuredSource returns the GBNF the fields ask for and the field that
// asked ("" for none). Only one may: grammar, json_schema and a non-text
// response_format exclude each other, as on llama-server.
func structuredSource(q *structuredFields, format json.RawMessage) (src, field string, e *apiError) {
	var schemas []struct {
		field  string
		schema json.RawMessage // nil: any JSON object
	}
	if given(q.JSONSchema) {
		schemas = append(schemas, struct {
			field  string
			schema json.RawMessage
		}{"json_schema", q.JSONSchema})
	}
	if given(format) {
		var f responseFormat
		if err := json.Unmarshal(format, &f); err != nil {
			return "", "", errInvalidJSON("response_format", "response_format must be an object with a type: %v", err)
		}
		var schema json.RawMessage
		switch f.Type {
		case "text":
		case "json_object":
			schema = f.Schema
			if !given(schema) {
				schema = nil
			}
			schemas = append(schemas, struct {
				field  string
				schema json.RawMessage
			}{"response_format", schema})
		case "json_schema":
			schema = json.RawMessage(`{}`) // llama-server's default: any JSON value
			if f.JSONSchema != nil && given(f.JSONSchema.Schema) {
				schema = f.JSONSchema.Schema
			}
			schemas = append(schemas, struct {
				field  string
				schema json.RawMessage
			}{"response_format", schema})
		default:
			return "", "", errBadRequest("response_format", `response_format type must be "text", "json_object" or "json_schema", have %q`, f.Type)
		}
	}
	switch {
	case len(schemas) == 0 && q.Grammar == "":
		return "", "", nil
	case len(schemas) == 0:
		return q.Grammar, "grammar", nil
	case q.Grammar != "" || len(schemas) > 1:
		other := "grammar"
		if len(schemas) > 1 {
			other = schemas[0].field
		}
		f := schemas[len(schemas)-1].field
		return "", "", errBadRequest(f, "send one of grammar, json_schema and response_format, not both %s and %s", other, f)
	}
	s := schemas[0]
	if s.schema == nil {
		return jsonschema.JSONObject, s.field, nil
	}
	src, err := jsonschema.ToGBNF(s.schema)
	if err != nil {
		return "", "", errBadRequest(s.field, "%s: %v", s.field, err)
	}
	return src, s.field, nil
}

// given reports whether a JSON field was sent with a value (not absent,
// not null).
func given(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// constraint is a fresh engine constraint for g's grammar, nil (the
// interface's nil, not a typed one) for an unconstrained request.
func (h *Handler) constraint(g *genRequest) engine.Constraint {
	if g.grammar == nil {
		return nil
	}
	h.vocab.once.Do(func() { h.vocab.v = tokens.NewVocab(h.opts.Tokenizer) })
	return tokens.New(g.grammar, h.vocab.v)
}

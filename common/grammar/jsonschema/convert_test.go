package jsonschema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"kvlab/common/grammar"
)

// llamaGolden are cases of llama.cpp's tests/test-json-schema-to-grammar.cpp
// whose expected grammar this converter reproduces rule for rule.
var llamaGolden = []struct{ name, schema, want string }{
	{"string w/ min & max length", `{"type": "string", "minLength": 1, "maxLength": 4}`, `
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
root ::= "\"" char{1,4} "\""
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
	{"boolean", `{"type": "boolean"}`, `
root ::= ("true" | "false")
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
	{"non-string enum", `{"enum": ["red", "amber", "green", null, 42, ["foo"]]}`, `
root ::= ("\"red\"" | "\"amber\"" | "\"green\"" | "null" | "42" | "[\"foo\"]")
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
	{"nullable string array", `{"type": ["array", "null"], "items": {"type": "string"}}`, `
alternative-0 ::= "[" space (string ("," space string)*)? space "]"
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
null ::= "null"
root ::= alternative-0 | null
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""`},
	{"min + maxItems", `{"items": {"type": ["number", "integer"]}, "minItems": 3, "maxItems": 5}`, `
decimal-part ::= [0-9]{1,16}
integer ::= ("-"? integral-part)
integral-part ::= [0] | [1-9] [0-9]{0,15}
item ::= number | integer
number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?
root ::= "[" space item ("," space item){2,4} space "]"
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
	{"required + optional props each in original order", `{
		"properties": {"b": {"type": "string"}, "a": {"type": "string"}, "d": {"type": "string"}, "c": {"type": "string"}},
		"required": ["a", "b"], "additionalProperties": false}`, `
a-kv ::= "\"a\"" space ":" space string
b-kv ::= "\"b\"" space ":" space string
c-kv ::= "\"c\"" space ":" space string
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
d-kv ::= "\"d\"" space ":" space string
d-rest ::= ( "," space c-kv )?
root ::= "{" space b-kv "," space a-kv ( "," space ( d-kv d-rest | c-kv ) )? space "}"
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""`},
	{"additional props", `{"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}}`, `
additional-kv ::= string ":" space additional-value
additional-value ::= "[" space (number ("," space number)*)? space "]"
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
decimal-part ::= [0-9]{1,16}
integral-part ::= [0] | [1-9] [0-9]{0,15}
number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?
root ::= "{" space  (additional-kv ( "," space additional-kv )* )? space "}"
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""`},
	{"empty w/o additional props", `{"type": "object", "additionalProperties": false}`, `
root ::= "{" space  space "}"
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
	{"top-level $ref", `{
		"$ref": "#/definitions/foo",
		"definitions": {"foo": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}}}`, `
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
ref-definitions-foo ::= "{" space ref-definitions-foo-a-kv space "}"
ref-definitions-foo-a-kv ::= "\"a\"" space ":" space string
root ::= ref-definitions-foo
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""`},
	{"literal string with escapes", `{
		"properties": {"code": {"const": " \r \n \" \\ ", "description": "Generated code", "title": "Code", "type": "string"}},
		"required": ["code"], "title": "DecoderResponse", "type": "object"}`, `
code ::= "\" \\r \\n \\\" \\\\ \""
code-kv ::= "\"code\"" space ":" space code
root ::= "{" space code-kv space "}"
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
	{"conflicting names", `{
		"type": "object",
		"properties": {"number": {"type": "object",
			"properties": {"number": {"type": "object", "properties": {"root": {"type": "number"}}, "required": ["root"], "additionalProperties": false}},
			"required": ["number"], "additionalProperties": false}},
		"required": ["number"], "additionalProperties": false, "definitions": {}}`, `
decimal-part ::= [0-9]{1,16}
integral-part ::= [0] | [1-9] [0-9]{0,15}
number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?
number- ::= "{" space number-number-kv space "}"
number-kv ::= "\"number\"" space ":" space number-
number-number ::= "{" space number-number-root-kv space "}"
number-number-kv ::= "\"number\"" space ":" space number-number
number-number-root-kv ::= "\"root\"" space ":" space number
root ::= "{" space number-kv space "}"
space ::= | " " | "\n"{1,2} [ \t]{0,20}`},
}

func TestLlamaCppGolden(t *testing.T) {
	for _, tc := range llamaGolden {
		got, err := ToGBNF([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if want := strings.TrimPrefix(tc.want, "\n") + "\n"; got != want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", tc.name, got, want)
		}
		if _, err := grammar.Parse(got); err != nil {
			t.Errorf("%s: the grammar does not parse: %v", tc.name, err)
		}
	}
}

func TestJSONObjectIsTheObjectSchema(t *testing.T) {
	got, err := ToGBNF([]byte(`{"type": "object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got != JSONObject {
		t.Fatalf("ToGBNF({\"type\":\"object\"}) =\n%s\nwant JSONObject\n%s", got, JSONObject)
	}
	g, err := grammar.Parse(JSONObject)
	if err != nil {
		t.Fatal(err)
	}
	for doc, ok := range map[string]bool{`{}`: true, `{"a": [1, {"b": null}], "c": "d"}`: true, `[]`: false, `"x"`: false, `{"a"}`: false} {
		m := g.NewMatcher()
		if got := m.Accept([]byte(doc)) && m.CanEnd(); got != ok {
			t.Errorf("JSONObject on %s: %v, want %v", doc, got, ok)
		}
	}
}

// TestRefusals: a keyword the grammar would have to ignore is an *Error
// naming the keyword and where it is.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct{ schema, ptr, keyword string }{
		{`{"type": "kaboom"}`, "/type", "type"},
		{`{"type": 123}`, "/type", "type"},
		{`{"type": "string", "format": "email"}`, "/format", "format"},
		{`{"type": "number", "minimum": 0}`, "/minimum", "minimum"},
		{`{"type": "string", "not": {"const": "a"}}`, "/not", "not"},
		{`{"properties": {"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}`, "/properties/a/uniqueItems", "uniqueItems"},
		{`{"type": "object", "required": ["a"]}`, "/required", "required"},
		{`{"properties": {"a/b": {"type": "object", "patternProperties": {}}}}`, "/properties/a~1b/patternProperties", "patternProperties"},
		{`{"$ref": "https://example.com/s.json"}`, "/$ref", "$ref"},
		{`{"$ref": "#/$defs/missing"}`, "/$ref", "$ref"},
		{`{"type": "string", "pattern": "^(?=a)b$"}`, "/pattern", "pattern"},
		{`{"type": "string", "pattern": "^a\\bb$"}`, "/pattern", "pattern"},
		{`{"type": "string", "pattern": "^a$b$"}`, "/pattern", "pattern"},
		{`{"type": "string", "pattern": "^(a$"}`, "/pattern", "pattern"},
		{`{"type": "integer", "minimum": 5, "maximum": 4}`, "", "minimum"},
		{`{"type": "string", "minLength": -1}`, "/minLength", "minLength"},
		{`{"items": {"type": "string"}, "minItems": 3, "maxItems": 2}`, "/minItems", "minItems"},
		{`{"anyOf": [{"type": "string"}, {"type": "integer"}], "type": "string"}`, "/type", "type"},
		{`{"anyOf": [{}], "type": "string"}`, "/type", "type"},
		{`{"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {"enum": ["x", 1]}}}`, "/type", "type"},
		{`{"allOf": [{"type": "object", "properties": {}, "minProperties": 1}]}`, "/allOf/0/minProperties", "minProperties"},
		{`{"properties": {"a": false}}`, "/properties/a", ""},
		{`{"prefixItems": [{"type": "string"}], "items": {"type": "number"}}`, "/items", "items"},
		{`{"$defs": {"x": {"type": "string", "contentEncoding": "base64"}}, "items": {"$ref": "#/$defs/x"}}`, "/$defs/x/contentEncoding", "contentEncoding"},
		{`{"type": "string", "const": 1}`, "/const", "const"},
		{`{"type": "boolean", "enum": [1, "true"]}`, "/enum", "enum"},
		{`{"type": "string", "minLength": 5000}`, "/minLength", "minLength"},
		{`{"type": "array", "items": {}, "minItems": 1.5}`, "/minItems", "minItems"},
		{`{"$ref": "#"}`, "/$ref", "$ref"},
		{`{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}`, "/$ref", "$ref"},
		{`{"type": "string", "pattern": "^(a*)*$"}`, "/pattern", "pattern"},
		{`{"type": "string", "pattern": "^(|a){2}$"}`, "/pattern", "pattern"},
		{`{"type": "object", "anyOf": [{"$ref": "#"}]}`, "/anyOf/0/$ref", "$ref"},
		{`{"$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}`, "/$defs/a/anyOf/1/$ref", "$ref"},
		{`{"allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"$ref": "#/$defs/a"}}}`, "/$defs/a/$ref", "$ref"},
		{`{"prefixItems": [{"type": "integer"}], "minItems": 2}`, "/minItems", "minItems"},
		{`{"type": "string", "pattern": "^` + strings.Repeat("(", 65) + "a" + strings.Repeat(")", 65) + `$"}`, "/pattern", "pattern"},
		{`123`, "", ""},
	} {
		_, err := ToGBNF([]byte(tc.schema))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: err %v, want an *Error", tc.schema, err)
			continue
		}
		if e.Pointer != tc.ptr || e.Keyword != tc.keyword {
			t.Errorf("%s: error at %q keyword %q (%v), want %q keyword %q", tc.schema, e.Pointer, e.Keyword, e, tc.ptr, tc.keyword)
		}
		if tc.keyword != "" && !strings.Contains(e.Error(), tc.keyword) {
			t.Errorf("%s: message %q does not name %s", tc.schema, e.Error(), tc.keyword)
		}
	}
}

// TestServerSchemas: the schemas of llama.cpp's server tests for
// json_schema and response_format convert (the ones it expects to work) or
// are refused (the ones it expects a 400 for).
func TestServerSchemas(t *testing.T) {
	for _, s := range []string{`{"const": "42"}`, `{"items": [{"type": "integer"}]}`, `{"const": "foooooo"}`} {
		g, err := ToGBNF([]byte(s))
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if _, err := grammar.Parse(g); err != nil {
			t.Errorf("%s: %v\n%s", s, err, g)
		}
	}
	for _, s := range []string{`123`, `{"type": 123}`, `{"type": "hiccup"}`} {
		if _, err := ToGBNF([]byte(s)); err == nil {
			t.Errorf("%s converted, want an error", s)
		}
	}
}

// TestLargeMaximumIsLowered: a maximum above MaxCount becomes MaxCount, so
// the grammar stays small and inside the schema.
func TestLargeMaximumIsLowered(t *testing.T) {
	g, err := ToGBNF([]byte(`{"type": "string", "maxLength": 1000000000}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g, "char{0,4096}") {
		t.Fatalf("maxLength not lowered to %d:\n%s", MaxCount, g)
	}
	gr, err := grammar.Parse(g)
	if err != nil {
		t.Fatal(err)
	}
	m := gr.NewMatcher()
	if !m.Accept([]byte(`"`+strings.Repeat("a", MaxCount)+`"`)) || !m.CanEnd() {
		t.Fatal("a string of MaxCount characters is refused")
	}
	if m := gr.NewMatcher(); m.Accept([]byte(`"`+strings.Repeat("a", MaxCount+1)+`"`)) && m.CanEnd() {
		t.Fatal("a string of MaxCount+1 characters is accepted")
	}
}

// FuzzPattern: a pattern the converter accepts yields a grammar that
// parses, and the converter never panics.
func FuzzPattern(f *testing.F) {
	for _, p := range []string{"^abc?d*efg+(hij)?kl$", "^(cat|dog|[^a-z\\s]{2})s?$", "a|^b$", "^[\\d.]{1,3}(?:x|)$", "^$", "^\"\\\\.$"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		schema, _ := json.Marshal(map[string]any{"type": "string", "pattern": p})
		g, err := ToGBNF(schema)
		if err != nil {
			return
		}
		if _, err := grammar.Parse(g); err != nil {
			t.Fatalf("pattern %q: %v\n%s", p, err, g)
		}
	})
}

// FuzzToGBNF: any input is converted or refused without a panic, and a
// converted schema yields a grammar that parses.
func FuzzToGBNF(f *testing.F) {
	for _, tc := range roundTrip {
		f.Add(tc.schema)
	}
	for _, tc := range llamaGolden {
		f.Add(tc.schema)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		g, err := ToGBNF([]byte(schema))
		if err != nil {
			return
		}
		if _, err := grammar.Parse(g); err != nil {
			t.Fatalf("schema %s: %v\n%s", schema, err, g)
		}
	})
}

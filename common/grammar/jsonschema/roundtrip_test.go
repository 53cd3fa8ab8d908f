package jsonschema

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"kvlab/common/grammar"
	"kvlab/common/grammar/grammartest"
)

// roundTrip are schemas covering every supported keyword, each with
// documents the schema accepts, spelled the way the grammar spells them,
// and documents it refuses (valid JSON that breaks one rule).
var roundTrip = []struct {
	name      string
	schema    string
	good, bad []string
}{
	{"string", `{"type": "string"}`, []string{`"hi"`, `"a\"b\\c\u00e9"`, `""`}, []string{`1`, `null`}},
	{"number", `{"type": "number"}`, []string{`-1.5e3`, `0`, `12.25`}, []string{`"1"`, `true`}},
	{"integer", `{"type": "integer"}`, []string{`-17`, `0`}, []string{`1.5`, `"3"`}},
	{"boolean", `{"type": "boolean"}`, []string{`true`, `false`}, []string{`0`, `"true"`}},
	{"null", `{"type": "null"}`, []string{`null`}, []string{`0`, `{}`}},
	{"any", `{}`, []string{`{"a": [1, "x"]}`, `3`, `null`}, nil},
	{"description only", `{"description": "anything at all"}`, []string{`[true]`}, nil},
	{"type array", `{"type": ["string", "null", "integer"]}`, []string{`"x"`, `null`, `4`}, []string{`1.5`, `[]`}},
	{"enum", `{"enum": ["red", 42, null, ["foo"], {"k": 1}]}`, []string{`"red"`, `42`, `null`, `["foo"]`, `{"k":1}`}, []string{`"blue"`, `43`}},
	{"typed enum", `{"type": ["string", "integer"], "enum": ["a", 1, 2.5, null, 3.0]}`, []string{`"a"`, `1`, `3.0`}, []string{`2.5`, `null`}},
	{"const", `{"const": {"a": [1, "two"]}}`, []string{`{"a":[1,"two"]}`}, []string{`{"a":[1,"three"]}`}},
	{"object required + optional", `{"type": "object", "properties": {
		"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
		"required": ["name"]}`,
		[]string{`{"name": "x"}`, `{"name": "x", "age": 3}`, `{"name": "x", "tags": ["a"]}`, `{"name": "x", "age": 3, "tags": []}`},
		[]string{`{"age": 3}`, `{"name": 1}`, `{"name": "x", "age": "3"}`}},
	{"additionalProperties false", `{"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": false}`,
		[]string{`{}`, `{"a": true}`}, []string{`{"b": 1}`, `{"a": 1}`}},
	{"additionalProperties schema", `{"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
		"additionalProperties": {"type": "string", "maxLength": 3}}`,
		[]string{`{"id": 1}`, `{"id": 1, "x": "abc", "yz": ""}`}, []string{`{"id": 1, "x": "abcd"}`, `{"id": 1, "x": 2}`}},
	{"additionalProperties true", `{"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": true}`,
		[]string{`{"a": null}`, `{"a": null, "b": [1]}`, `{"zz": {}}`}, []string{`{"a": 1}`}},
	{"additionalProperties only", `{"type": "object", "additionalProperties": {"type": "number"}}`,
		[]string{`{}`, `{"a": 1, "b": 2.5}`}, []string{`{"a": "1"}`}},
	{"anyOf", `{"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer", "minimum": 10}]}`,
		[]string{`"ab"`, `10`, `123`}, []string{`"a"`, `9`, `true`}},
	{"oneOf", `{"oneOf": [{"type": "boolean"}, {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}]}`,
		[]string{`true`, `{"x": 1}`}, []string{`{"y": 1}`, `null`}},
	{"typed anyOf of refs", `{"type": "object", "anyOf": [{"$ref": "#/definitions/foo"}, {"$ref": "#/definitions/bar"}],
		"definitions": {"foo": {"properties": {"a": {"type": "number"}}}, "bar": {"properties": {"b": {"type": "number"}}}}}`,
		[]string{`{"a": 1}`, `{"b": 2}`, `{}`}, []string{`{"a": "1", "b": "2"}`, `[]`}},
	{"allOf of objects", `{"allOf": [
		{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
		{"$ref": "#/$defs/b"},
		{"anyOf": [{"properties": {"c": {"type": "boolean"}}}]}],
		"$defs": {"b": {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}}}`,
		[]string{`{"a": "x", "b": 1}`, `{"a": "x", "b": 1, "c": true}`}, []string{`{"a": "x"}`, `{"a": "x", "b": "1"}`}},
	{"allOf of enums", `{"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}]}`,
		[]string{`"b"`, `"c"`}, []string{`"a"`, `"d"`}},
	{"items minItems maxItems", `{"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}`,
		[]string{`[1, 2]`, `[1, 2, 3, 4]`}, []string{`[1]`, `[1, 2, 3, 4, 5]`, `[1, "2"]`}},
	{"maxItems 0", `{"type": "array", "items": {"type": "string"}, "maxItems": 0}`, []string{`[]`}, []string{`["a"]`}},
	{"prefixItems", `{"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": false}`,
		[]string{`["a", 1]`}, []string{`[1, "a"]`, `["a", 1, 2]`}},
	{"items tuple (draft-07)", `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}, {"const": "x"}], "additionalItems": false}`,
		[]string{`[1, "x"]`}, []string{`[1, "y"]`, `["1", "x"]`}},
	{"minLength maxLength", `{"type": "string", "minLength": 2, "maxLength": 5}`,
		[]string{`"ab"`, `"abcde"`, `"\u00e9\n"`}, []string{`"a"`, `"abcdef"`}},
	{"formats", `{"type": "array", "prefixItems": [{"type": "string", "format": "date"}, {"type": "string", "format": "time"},
		{"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid"}], "items": false}`,
		[]string{`["2024-02-28", "23:59:59Z", "2024-01-31T08:00:00.123+05:30", "123e4567-e89b-12d3-a456-426614174000"]`},
		[]string{`["2024-13-01", "23:59:59Z", "2024-01-31T08:00:00Z", "123e4567-e89b-12d3-a456-426614174000"]`,
			`["2024-02-28", "24:00:00Z", "2024-01-31T08:00:00Z", "123e4567-e89b-12d3-a456-426614174000"]`,
			`["2023-02-30", "23:59:59Z", "2024-01-31T08:00:00Z", "123e4567-e89b-12d3-a456-426614174000"]`,
			`["2023-04-31", "23:59:59Z", "2024-01-31T08:00:00Z", "123e4567-e89b-12d3-a456-426614174000"]`,
			`["2024-02-28", "23:59:59Z", "2024-01-31T08:00:00Z", "123e4567-e89b-12d3-a456"]`}},
	{"pattern anchored", `{"type": "string", "pattern": "^[A-Z][a-z]+(-[A-Z][a-z]+)?\\d{2,3}$"}`,
		[]string{`"Ab12"`, `"Jean-Luc007"`}, []string{`"ab12"`, `"Ab1"`, `"Ab1234"`}},
	{"pattern alternation and classes", `{"type": "string", "pattern": "^(cat|dog|[^a-z\\s]{2})s?$"}`,
		[]string{`"cats"`, `"dog"`, `"XY"`, `"12s"`}, []string{`"cow"`, `"ab"`, `"X Y"`}},
	{"pattern quote and dot", `{"type": "string", "pattern": "^\"..?\\.[\"\\\\x]$"}`,
		[]string{`"\"ab.\\"`, `"\"a.x"`}, []string{`"\"abc.x"`, `"a.x"`}},
	{"pattern of llama.cpp's tests", `{"type": "string", "pattern": "^(\\([0-9]{1,3}\\))?[0-9]{3}-[0-9]{4} a{3,5}nd...$"}`,
		[]string{`"(12)345-6789 aaand..."`, `"345-6789 aaaaandxyz"`}, []string{`"(1234)345-6789 aaand..."`, `"345-6789 aand..."`}},
	{"pattern escapes", `{"type": "string", "pattern": "^\\[\\]\\{\\}\\(\\)\\|\\+\\*\\?\\\\/$"}`,
		[]string{`"[]{}()|+*?\\/"`}, []string{`"[]{}()|+*?"`}},
	{"format beside a number", `{"type": "object", "properties": {"n": {"type": "integer", "format": "int32"}, "x": {"type": "number", "format": "double"}}, "required": ["n", "x"]}`,
		[]string{`{"n": 1, "x": 2.5}`}, []string{`{"n": 1.5, "x": 2.5}`}},
	{"pattern unanchored", `{"type": "string", "pattern": "ab+c"}`,
		[]string{`"abc"`, `"xxabbbcyy"`}, []string{`"ac"`, `"xyz"`}},
	{"pattern top-level alternation", `{"type": "string", "pattern": "^a|b$"}`,
		[]string{`"axx"`, `"xxb"`, `"a"`}, []string{`"xax"`}},
	{"integer range across zero", `{"type": "integer", "minimum": -12, "maximum": 207}`,
		[]string{`-12`, `-1`, `0`, `9`, `99`, `207`, `150`}, []string{`-13`, `208`, `300`, `1000`}},
	{"integer exclusive bounds", `{"type": "integer", "exclusiveMinimum": 15, "exclusiveMaximum": 301}`,
		[]string{`16`, `300`, `99`, `100`}, []string{`15`, `301`, `0`, `-20`}},
	{"integer minimum only", `{"type": "integer", "minimum": 25}`,
		[]string{`25`, `99`, `100`, `123456789`}, []string{`24`, `-25`, `0`}},
	{"integer maximum only", `{"type": "integer", "maximum": -5}`,
		[]string{`-5`, `-100`, `-999999`}, []string{`-4`, `0`, `5`}},
	{"$ref definitions", `{"type": "object", "properties": {"p": {"$ref": "#/definitions/point"}, "q": {"$ref": "#/definitions/point"}},
		"required": ["p"], "additionalProperties": false,
		"definitions": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"], "additionalProperties": false}}}`,
		[]string{`{"p": {"x": 1, "y": 2}}`, `{"p": {"x": 1, "y": 2}, "q": {"x": 0, "y": -1}}`}, []string{`{"p": {"x": 1}}`, `{"q": {"x": 1, "y": 2}}`}},
	{"recursive $defs", `{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
		"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"], "additionalProperties": false}}}`,
		[]string{`{"v": 1}`, `{"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]}`}, []string{`{"v": 1, "kids": [{"w": 2}]}`, `{"v": 1, "kids": [{"v": 1}, {"v": 1}, {"v": 1}]}`}},
	{"pydantic model", `{"$defs": {"Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
		"Item": {"properties": {"sku": {"format": "uuid", "title": "Sku", "type": "string"}, "qty": {"exclusiveMinimum": 0, "title": "Qty", "type": "integer"}},
			"required": ["sku", "qty"], "title": "Item", "type": "object"}},
		"properties": {
			"name": {"maxLength": 10, "title": "Name", "type": "string"},
			"color": {"$ref": "#/$defs/Color"},
			"items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array"},
			"pair": {"maxItems": 2, "minItems": 2, "prefixItems": [{"type": "integer"}, {"type": "string"}], "title": "Pair", "type": "array"},
			"note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Note"},
			"when": {"format": "date-time", "title": "When", "type": "string"},
			"counts": {"additionalProperties": {"type": "integer"}, "title": "Counts", "type": "object"}},
		"required": ["name", "color", "items", "pair", "when", "counts"], "title": "Order", "type": "object"}`,
		[]string{`{"name": "n", "color": "red", "items": [{"sku": "123e4567-e89b-12d3-a456-426614174000", "qty": 2}], "pair": [1, "a"], "when": "2024-05-06T07:08:09Z", "counts": {"a": 1}}`,
			`{"name": "", "color": "green", "items": [], "pair": [0, ""], "when": "2024-05-06T07:08:09.123-01:00", "counts": {}, "note": null}`},
		[]string{`{"name": "n", "color": "blue", "items": [], "pair": [1, "a"], "when": "2024-05-06T07:08:09Z", "counts": {}}`,
			`{"name": "n", "color": "red", "items": [{"sku": "123e4567-e89b-12d3-a456-426614174000", "qty": 0}], "pair": [1, "a"], "when": "2024-05-06T07:08:09Z", "counts": {}}`,
			`{"name": "n", "color": "red", "items": [], "pair": [1], "when": "2024-05-06T07:08:09Z", "counts": {}}`}},
	{"nested nullable", `{"type": "object", "properties": {"when": {"type": ["string", "null"], "format": "date"}, "n": {"type": ["integer", "null"], "minimum": 0, "maximum": 9}},
		"required": ["when", "n"], "additionalProperties": false}`,
		[]string{`{"when": null, "n": 3}`, `{"when": "2020-06-30", "n": null}`}, []string{`{"when": "2020-06-31", "n": 3}`, `{"when": null, "n": 10}`}},
}

// compileValidator compiles schema with an independent JSON schema
// validator, formats asserted.
func compileValidator(t *testing.T, schema string) *validator.Schema {
	t.Helper()
	doc, err := validator.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := validator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("the validator refuses the schema: %v", err)
	}
	return s
}

// validates reports whether doc is JSON the schema accepts.
func validates(s *validator.Schema, doc []byte) (bool, error) {
	v, err := validator.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return false, err
	}
	err = s.Validate(v)
	return err == nil, err
}

func matches(g *grammar.Grammar, doc []byte) bool {
	m := g.NewMatcher()
	return m.Accept(doc) && m.CanEnd()
}

// walk produces one document the grammar accepts (grammartest.Walk),
// closing brackets and strings first once the document is longer than its
// random target length; false when it found no end within 4000 bytes, or
// (with the test failed) when the walk is stuck.
func walk(t *testing.T, g *grammar.Grammar, rng *rand.Rand) ([]byte, bool) {
	closers := [][]byte{[]byte(`"`), []byte("]"), []byte("}")}
	doc, err := grammartest.Walk(g.NewMatcher(), rng, closers, 1+rng.IntN(120), 4000)
	if err != nil {
		if !errors.Is(err, grammartest.ErrNoEnd) {
			t.Error(err)
		}
		return nil, false
	}
	return doc, true
}

// mutate changes doc at one random place: a byte deleted, inserted or replaced.
func mutate(doc []byte, rng *rand.Rand) []byte {
	out := append([]byte(nil), doc...)
	const alphabet = `{}[]",:0123456789-.eE tfnaxz\`
	pick := alphabet[rng.IntN(len(alphabet))]
	switch i := rng.IntN(len(out) + 1); rng.IntN(3) {
	case 0:
		if i < len(out) {
			return append(out[:i], out[i+1:]...)
		}
		return out[:0]
	case 1:
		return append(out[:i], append([]byte{pick}, out[i:]...)...)
	default:
		if i < len(out) {
			out[i] = pick
		}
		return out
	}
}

// TestGrammarAgreesWithValidator: for every schema, the hand-written good
// documents match the grammar and validate; the bad ones are refused by
// both; documents from a random walk over the grammar all validate; and a
// mutation of one that the grammar still accepts also validates (the
// grammar's language is inside the schema's).
func TestGrammarAgreesWithValidator(t *testing.T) {
	walks, bothRefused := 0, 0
	for ci, tc := range roundTrip {
		t.Run(tc.name, func(t *testing.T) {
			src, err := ToGBNF([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			g, err := grammar.Parse(src)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			val := compileValidator(t, tc.schema)
			for _, d := range tc.good {
				if ok, err := validates(val, []byte(d)); !ok {
					t.Errorf("good %s: the validator refuses it: %v", d, err)
				}
				if !matches(g, []byte(d)) {
					t.Errorf("good %s: the grammar refuses it\n%s", d, src)
				}
			}
			for _, d := range tc.bad {
				if ok, _ := validates(val, []byte(d)); ok {
					t.Errorf("bad %s: the validator accepts it", d)
				}
				if matches(g, []byte(d)) {
					t.Errorf("bad %s: the grammar accepts it\n%s", d, src)
				}
			}
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			for range 30 {
				doc, ok := walk(t, g, rng)
				if !ok {
					continue
				}
				walks++
				if testing.Verbose() && walks%97 == 0 {
					t.Logf("walked %q", doc)
				}
				if ok, err := validates(val, doc); !ok {
					t.Errorf("walked %q: the grammar accepts it but the validator refuses it: %v\n%s", doc, err, src)
					continue
				}
				for range 10 {
					mut := mutate(doc, rng)
					valid, err := validates(val, mut)
					switch {
					case matches(g, mut) && !valid:
						t.Errorf("mutated %q (from %q): the grammar accepts it but the validator refuses it: %v", mut, doc, err)
					case !valid:
						bothRefused++
					}
				}
			}
		})
	}
	if len(roundTrip) < 20 {
		t.Errorf("only %d schemas", len(roundTrip))
	}
	if walks < 20*len(roundTrip) || bothRefused == 0 {
		t.Errorf("%d walks finished, %d mutations refused by both: too few to mean anything", walks, bothRefused)
	}
	t.Log(fmt.Sprintf("%d walked documents, %d mutations refused by both", walks, bothRefused))
}

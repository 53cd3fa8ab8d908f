package jsonschema_test

import (
	"errors"
	"fmt"

	"kvlab/common/grammar"
	"kvlab/common/grammar/jsonschema"
)

// A schema becomes a grammar; the grammar's matcher takes the documents the
// schema describes, spelled the way the grammar spells them, and refuses
// the others.
func ExampleToGBNF() {
	src, err := jsonschema.ToGBNF([]byte(`{
		"type": "object",
		"properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
		"required": ["name"],
		"additionalProperties": false}`))
	if err != nil {
		panic(err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		panic(err)
	}
	for _, doc := range []string{`{"name": "Ada", "age": 36}`, `{"name": "Ada"}`, `{"age": 36}`, `{"name": "Ada", "age": 151}`} {
		m := g.NewMatcher()
		fmt.Println(doc, m.Accept([]byte(doc)) && m.CanEnd())
	}

	_, err = jsonschema.ToGBNF([]byte(`{"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}}`))
	var e *jsonschema.Error
	if errors.As(err, &e) {
		fmt.Println(e.Pointer, e.Keyword)
	}
	// Output:
	// {"name": "Ada", "age": 36} true
	// {"name": "Ada"} true
	// {"age": 36} false
	// {"name": "Ada", "age": 151} false
	// /properties/tags/uniqueItems uniqueItems
}

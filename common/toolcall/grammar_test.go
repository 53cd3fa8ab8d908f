package toolcall

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	validator "github.com/santhosh-tekuri/jsonschema/v6"

	"kvlab/common/grammar"
	"kvlab/common/grammar/grammartest"
)

// testTools cover what arguments schemas use: required and optional
// properties, enums, integer ranges, arrays of objects, type unions, $ref
// into $defs, no parameters at all, and schemas with no type of their own
// (properties alone, or nothing but a description, which by itself would
// admit any JSON value).
const testTools = `[
 {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters":
  {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]}}},
 {"type": "function", "function": {"name": "search", "parameters":
  {"type": "object", "properties": {"query": {"type": "string", "maxLength": 20},
   "filters": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": ["string", "number", "boolean"]}}, "required": ["k", "v"]}}},
   "required": ["query"]}}},
 {"type": "function", "function": {"name": "now"}},
 {"type": "function", "function": {"name": "move", "parameters":
  {"type": "object", "properties": {"to": {"$ref": "#/$defs/point"}}, "required": ["to"],
   "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}}}}},
 {"type": "function", "function": {"name": "toggle", "parameters": {"properties": {"on": {"type": "boolean"}}}}},
 {"type": "function", "function": {"name": "note", "parameters": {"description": "free-form"}}}
]`

func mustTools(t *testing.T) []Tool {
	t.Helper()
	tools, err := ParseTools([]byte(testTools))
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

// validators compiles each tool's schema with an independent validator;
// the arguments must also be an object, whatever the schema says. The
// tool's schema is a resource of its own, so that its $ref resolve in it.
func validators(t *testing.T, tools []Tool) map[string]*validator.Schema {
	t.Helper()
	out := map[string]*validator.Schema{}
	for _, tool := range tools {
		c := validator.NewCompiler()
		params := tool.Parameters
		if len(params) == 0 {
			params = []byte(`{}`)
		}
		inner, err := validator.UnmarshalJSON(bytes.NewReader(params))
		if err != nil {
			t.Fatal(err)
		}
		outer, err := validator.UnmarshalJSON(strings.NewReader(`{"allOf": [{"type": "object"}, {"$ref": "mem://params.json"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("mem://params.json", inner); err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("mem://call.json", outer); err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile("mem://call.json")
		if err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		out[tool.Name] = s
	}
	return out
}

// walk produces one answer the grammar accepts (grammartest.Walk),
// closing strings, brackets and tags first once past a random length.
func walk(t *testing.T, g *grammar.Grammar, rng *rand.Rand) string {
	t.Helper()
	closers := [][]byte{[]byte(`"`), []byte("]"), []byte("}"), []byte("\n"), []byte("<")}
	doc, err := grammartest.Walk(g.NewMatcher(), rng, closers, 1+rng.IntN(150), 5000)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

func accepts(g *grammar.Grammar, s string) bool {
	m := g.NewMatcher()
	return m.Accept([]byte(s)) && m.CanEnd()
}

// TestGrammarAnswersParse generates random answers from every grammar
// (each format, required and each named function, parallel or not) and
// checks that Parse reads each as calls only, as many as allowed, of
// allowed names, with arguments the tool's schema accepts by an
// independent validator; and that the stream reads the same.
func TestGrammarAnswersParse(t *testing.T) {
	tools := mustTools(t)
	valid := validators(t, tools)
	rng := rand.New(rand.NewPCG(3, 4))
	choices := []Choice{{Mode: "required"}}
	for _, tool := range tools {
		choices = append(choices, Choice{Mode: "function", Name: tool.Name})
	}
	n := 40
	if testing.Short() {
		n = 8
	}
	for _, f := range []Format{Llama3, Hermes, Generic} {
		for _, parallel := range []bool{false, true} {
			for _, c := range choices {
				src, err := Grammar(f, tools, c, parallel)
				if err != nil {
					t.Fatal(err)
				}
				g, err := grammar.Parse(src)
				if err != nil {
					t.Fatalf("%v %v: %v\n%s", f, c, err, src)
				}
				sawMany := false
				for range n {
					answer := walk(t, g, rng)
					where := fmt.Sprintf("%v %+v parallel=%v: %q", f, c, parallel, answer)
					content, calls := Parse(f, answer)
					if content != "" || len(calls) == 0 || !parallel && len(calls) != 1 {
						t.Fatalf("%s: Parse gave content %q and %d calls", where, content, len(calls))
					}
					sawMany = sawMany || len(calls) > 1
					for _, call := range calls {
						if c.Mode == "function" && call.Name != c.Name {
							t.Fatalf("%s: call of %q", where, call.Name)
						}
						v, ok := valid[call.Name]
						if !ok {
							t.Fatalf("%s: call of unknown tool %q", where, call.Name)
						}
						doc, err := validator.UnmarshalJSON(strings.NewReader(call.Arguments))
						if err != nil {
							t.Fatalf("%s: arguments %s: %v", where, call.Arguments, err)
						}
						if err := v.Validate(doc); err != nil {
							t.Fatalf("%s: arguments %s: %v", where, call.Arguments, err)
						}
					}
					checkStream(t, f, answer, randomCuts(rng, len(answer)))
				}
				if parallel && !sawMany && c.Mode == "required" && f != Generic {
					t.Errorf("%v parallel: no answer of %d had more than one call", f, n)
				}
			}
		}
	}
}

// call writes one call the way format f does.
func call(f Format, name, args string) string {
	switch f {
	case Llama3:
		return `{"name": "` + name + `", "parameters": ` + args + `}`
	case Hermes:
		return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
	}
	return `{"tool_call": {"name": "` + name + `", "arguments": ` + args + `}}`
}

// TestGrammarRefuses checks answers the grammar must accept and refuse:
// the named function only, arguments by the schema, no text around a
// forced call, one call unless parallel.
func TestGrammarRefuses(t *testing.T) {
	tools := mustTools(t)
	for _, f := range []Format{Llama3, Hermes, Generic} {
		get := Choice{Mode: "function", Name: "get_weather"}
		src, err := Grammar(f, tools, get, false)
		if err != nil {
			t.Fatal(err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		good := call(f, "get_weather", `{"city": "Paris", "days": 3}`)
		for answer, want := range map[string]bool{
			good:                                                   true,
			call(f, "search", `{"query": "x"}`):                    false, // not the named function
			call(f, "get_weather", `{"city": 5}`):                  false, // city is a string
			call(f, "get_weather", `{"days": 3}`):                  false, // city is required
			call(f, "get_weather", `{"city": "P", "days": 9}`):     false, // days at most 7
			call(f, "get_weather", `{"city": "P", "unit": "k"}`):   false, // not in the enum
			call(f, "get_weather", `{"city": "P", "extra": true}`): false, // no other keys
			"Sure. " + good:                                        false,
			good + " done":                                         false,
			call(f, "get_weather", `{"city": "Paris"}`) + "\n" + call(f, "get_weather", `{"city": "Rome"}`): false,
		} {
			if got := accepts(g, answer); got != want {
				t.Errorf("%v: %q accepted=%v, want %v", f, answer, got, want)
			}
		}
		req, err := Grammar(f, tools, Choice{Mode: "required"}, true)
		if err != nil {
			t.Fatal(err)
		}
		g, err = grammar.Parse(req)
		if err != nil {
			t.Fatal(err)
		}
		for answer, want := range map[string]bool{
			call(f, "now", `{"anything": [1, {"at": "all"}]}`): true,
			call(f, "toggle", `{"on": true}`):                  true,
			call(f, "toggle", `{"on": "yes"}`):                 false,
			call(f, "move", `{"to": {"x": 1, "y": 2.5}}`):      true,
			call(f, "move", `{"to": {"x": 1}}`):                false,
			call(f, "nope", `{}`):                              false,
			call(f, "now", `[]`):                               false,
		} {
			if got := accepts(g, answer); got != want {
				t.Errorf("%v required: %q accepted=%v, want %v", f, answer, got, want)
			}
		}
	}
}

// TestGrammarNoneAuto: none and auto never constrain.
func TestGrammarNoneAuto(t *testing.T) {
	tools := mustTools(t)
	for _, mode := range []string{"none", "auto"} {
		for _, f := range []Format{Llama3, Hermes, Generic} {
			if src, err := Grammar(f, tools, Choice{Mode: mode}, true); src != "" || err != nil {
				t.Errorf("%v %s: %q, %v", f, mode, src, err)
			}
		}
	}
}

// TestGrammarErrors: a schema the converter refuses is an error naming the
// tool, as are an unknown function and required with no tools.
func TestGrammarErrors(t *testing.T) {
	tools := mustTools(t)
	bad := append(append([]Tool{}, tools...), Tool{Name: "odd", Parameters: []byte(`{"type": "object", "not": {"required": ["a"]}}`)})
	cases := []struct {
		tools []Tool
		c     Choice
		want  string
	}{
		{bad, Choice{Mode: "required"}, "tools[6].function.parameters (odd)"},
		{bad, Choice{Mode: "function", Name: "odd"}, "tools[6].function.parameters (odd)"},
		{tools, Choice{Mode: "function", Name: "missing"}, "tool_choice.function.name"},
		{nil, Choice{Mode: "required"}, "tool_choice"},
		{tools, Choice{Mode: "sometimes"}, "tool_choice"},
	}
	for _, c := range cases {
		_, err := Grammar(Hermes, c.tools, c.c, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", c.c, err, c.want)
		}
	}
	// A refused schema of a tool the choice leaves out does not matter.
	if _, err := Grammar(Hermes, bad, Choice{Mode: "function", Name: "now"}, false); err != nil {
		t.Errorf("function now: %v", err)
	}
}

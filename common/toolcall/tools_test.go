package toolcall

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTools(t *testing.T) {
	tools, err := ParseTools([]byte(`[{"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object",  "properties": {"b": {}, "a": {}}}}},
		{"type": "function", "function": {"name": "g", "parameters": null, "strict": false}}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Tool{
		{Name: "f", Description: "does f", Parameters: []byte(`{"type":"object","properties":{"b":{},"a":{}}}`)},
		{Name: "g"},
	}
	if !reflect.DeepEqual(tools, want) {
		t.Fatalf("got %+v, want %+v", tools, want)
	}
	if tools, err := ParseTools(nil); tools != nil || err != nil {
		t.Errorf("absent tools: %v %v", tools, err)
	}
}

// TestParseToolsErrors: each malformed tools array is refused with an
// error naming the field.
func TestParseToolsErrors(t *testing.T) {
	fn := func(body string) string { return `[{"type": "function", "function": ` + body + `}]` }
	cases := map[string]string{
		`{"type": "function"}`:                                "tools: must be an array",
		`[1]`:                                                 "tools[0]: must be an object",
		`[{"function": {"name": "f"}}]`:                       "tools[0].type: missing",
		`[{"type": "code_interpreter"}]`:                      "tools[0].type: must be \"function\"",
		`[{"type": "function"}]`:                              "tools[0].function: missing",
		`[{"type": "function", "function": "f"}]`:             "tools[0].function: must be an object",
		`[{"type": "function", "function": {}, "x": 1}]`:      "tools[0].x: not supported",
		fn(`{"description": "no name"}`):                      "tools[0].function.name: missing",
		fn(`{"name": 3}`):                                     "tools[0].function.name: must be a string",
		fn(`{"name": "has space"}`):                           "tools[0].function.name:",
		fn(`{"name": ""}`):                                    "tools[0].function.name:",
		fn(`{"name": "f", "description": 1}`):                 "tools[0].function.description: must be a string",
		fn(`{"name": "f", "parameters": "object"}`):           "tools[0].function.parameters: must be an object",
		fn(`{"name": "f", "parameters": {"type": "string"}}`): "tools[0].function.parameters.type",
		fn(`{"name": "f", "strict": true}`):                   "tools[0].function.strict",
		fn(`{"name": "f", "returns": {}}`):                    "tools[0].function.returns: not supported",
		`[{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]`: "tools[1].function.name: \"f\" is already",
	}
	for raw, want := range cases {
		_, err := ParseTools([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", raw, err, want)
		}
	}
}

func TestParseChoice(t *testing.T) {
	tools := []Tool{{Name: "f"}, {Name: "g"}}
	cases := []struct {
		raw   string
		tools []Tool
		want  Choice
	}{
		{"", tools, Choice{Mode: "auto"}},
		{"null", tools, Choice{Mode: "auto"}},
		{"", nil, Choice{Mode: "none"}},
		{`"none"`, tools, Choice{Mode: "none"}},
		{`"auto"`, nil, Choice{Mode: "auto"}},
		{`"required"`, tools, Choice{Mode: "required"}},
		{`{"type": "function", "function": {"name": "g"}}`, tools, Choice{Mode: "function", Name: "g"}},
	}
	for _, c := range cases {
		got, err := ParseChoice([]byte(c.raw), c.tools)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.raw, got, err, c.want)
		}
	}
}

// TestParseChoiceErrors: each bad tool_choice is refused naming the field.
func TestParseChoiceErrors(t *testing.T) {
	tools := []Tool{{Name: "f"}}
	cases := []struct {
		raw   string
		tools []Tool
		want  string
	}{
		{`"required"`, nil, "tool_choice: \"required\" needs"},
		{`"always"`, tools, "tool_choice: must be"},
		{`3`, tools, "tool_choice: must be"},
		{`{"function": {"name": "f"}}`, tools, "tool_choice.type: missing"},
		{`{"type": "tool", "function": {"name": "f"}}`, tools, "tool_choice.type: must be \"function\""},
		{`{"type": "function"}`, tools, "tool_choice.function: missing"},
		{`{"type": "function", "function": "f"}`, tools, "tool_choice.function: must be an object"},
		{`{"type": "function", "function": {}}`, tools, "tool_choice.function.name: missing"},
		{`{"type": "function", "function": {"name": 1}}`, tools, "tool_choice.function.name: must be a string"},
		{`{"type": "function", "function": {"name": "g"}}`, tools, "tool_choice.function.name: \"g\" is not"},
		{`{"type": "function", "function": {"name": "f"}}`, nil, "tool_choice.function.name: \"f\" is not"},
		{`{"type": "function", "function": {"name": "f", "x": 1}}`, tools, "tool_choice.function.x: not supported"},
	}
	for _, c := range cases {
		_, err := ParseChoice([]byte(c.raw), c.tools)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.raw, err, c.want)
		}
	}
}

// TestSystemPrompt: Generic's prompt names every tool with its schema and
// the reply format, tool_calls only when parallel; the other formats, and
// no tools, add nothing.
func TestSystemPrompt(t *testing.T) {
	tools := []Tool{{Name: "get_weather", Description: "Weather \"now\".", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}, {Name: "now"}}
	p := SystemPrompt(Generic, tools, false)
	for _, want := range []string{`"name": "get_weather"`, `"description": "Weather \"now\"."`, `{"type":"object","properties":{"city":{"type":"string"}}}`, `"name": "now"`, `{"tool_call": `, `{"response": `} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %s:\n%s", want, p)
		}
	}
	if strings.Contains(p, "tool_calls") {
		t.Errorf("prompt offers tool_calls without parallel:\n%s", p)
	}
	if !strings.Contains(SystemPrompt(Generic, tools, true), `{"tool_calls": [`) {
		t.Errorf("parallel prompt lacks tool_calls")
	}
	for _, f := range []Format{Llama3, Hermes} {
		if p := SystemPrompt(f, tools, true); p != "" {
			t.Errorf("%v: %q", f, p)
		}
	}
	if p := SystemPrompt(Generic, nil, true); p != "" {
		t.Errorf("no tools: %q", p)
	}
}

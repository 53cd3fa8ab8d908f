package toolcall

import (
	"reflect"
	"testing"
)

type parseCase struct {
	name    string
	text    string
	content string
	calls   []Call
}

func checkParse(t *testing.T, f Format, cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		content, calls := Parse(f, c.text)
		if content != c.content || !reflect.DeepEqual(calls, c.calls) {
			t.Errorf("%v %s: Parse(%q) = %q %v, want %q %v", f, c.name, c.text, content, calls, c.content, c.calls)
		}
	}
}

func TestParseHermes(t *testing.T) {
	weather := Call{"get_weather", `{"city":"Paris","days":[1,2]}`}
	checkParse(t, Hermes, []parseCase{
		{"plain text", "Paris is sunny.", "Paris is sunny.", nil},
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>", "", []Call{weather}},
		{"text before, trimmed", "Let me look.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1,2]}}\n</tool_call>\n", "Let me look.", []Call{weather}},
		{"no newlines, spaces", "<tool_call> {\"name\":\"get_weather\",\"arguments\":{ \"city\" : \"Paris\" , \"days\":[1 ,2]} }   </tool_call>", "", []Call{weather}},
		{"two calls", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": {\"y\": \"z\"}}}\n</tool_call>", "", []Call{{"a", `{}`}, {"b", `{"x":{"y":"z"}}`}}},
		{"key order kept", "<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": 2}}</tool_call>", "", []Call{{"f", `{"z":1,"a":2}`}}},
		{"arguments before name", "<tool_call>{\"arguments\": {}, \"name\": \"f\"}</tool_call>", "", []Call{{"f", `{}`}}},
		{"parameters accepted", "<tool_call>{\"name\": \"f\", \"parameters\": {\"a\": 1}}</tool_call>", "", []Call{{"f", `{"a":1}`}}},
		{"close tag inside a string", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"code\": \"x = '</tool_call>'\"}}\n</tool_call>", "", []Call{{"f", `{"code":"x = '</tool_call>'"}`}}},
		{"escaped quote before close tag in string", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"\\\"</tool_call>\"}}</tool_call>", "", []Call{{"f", `{"s":"\"</tool_call>"}`}}},
		{"malformed JSON stays content", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>", nil},
		{"not an object", "<tool_call>get_weather(Paris)</tool_call>", "<tool_call>get_weather(Paris)</tool_call>", nil},
		{"arguments not an object", "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", nil},
		{"empty name", "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", nil},
		{"extra key", "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"id\": 1}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": {}, \"id\": 1}</tool_call>", nil},
		{"unclosed block", "ok <tool_call>{\"name\": \"f\", \"arguments\": {}}", "ok <tool_call>{\"name\": \"f\", \"arguments\": {}}", nil},
		{"text after object ends block at first close", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"}} oops</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"}} oops</tool_call>", nil},
		{"bad block then call", "A <tool_call>nope</tool_call> B\n<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>\n C ", "A <tool_call>nope</tool_call> B\nC ", []Call{{"g", `{}`}}},
		{"text between calls", "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> and <tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>", "and", []Call{{"a", `{}`}, {"b", `{}`}}},
		{"unclosed object at the end", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call> x", "<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call> x", nil},
	})
}

func TestParseLlama3(t *testing.T) {
	checkParse(t, Llama3, []parseCase{
		{"plain text", "It is sunny.", "It is sunny.", nil},
		{"one call", `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "", []Call{{"get_weather", `{"city":"Paris"}`}}},
		{"whitespace", " \n {\"name\" : \"f\" ,\n \"parameters\" : { \"a\" : [ 1 , { \"b\" : null } ] } } \n", "", []Call{{"f", `{"a":[1,{"b":null}]}`}}},
		{"arguments accepted", `{"name": "f", "arguments": {"a": "}"}}`, "", []Call{{"f", `{"a":"}"}`}}},
		{"semicolon", `{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}`, "", []Call{{"a", `{}`}, {"b", `{"x":1}`}}},
		{"newline", "{\"name\": \"a\", \"parameters\": {}}\n{\"name\": \"b\", \"parameters\": {}}", "", []Call{{"a", `{}`}, {"b", `{}`}}},
		{"two semicolons", `{"name": "a", "parameters": {}};;{"name": "b", "parameters": {}}`, `{"name": "a", "parameters": {}};;{"name": "b", "parameters": {}}`, nil},
		{"trailing text", `{"name": "a", "parameters": {}} done`, `{"name": "a", "parameters": {}} done`, nil},
		{"text before", `Calling {"name": "a", "parameters": {}}`, `Calling {"name": "a", "parameters": {}}`, nil},
		{"malformed", `{"name": "a", "parameters": {]}`, `{"name": "a", "parameters": {]}`, nil},
		{"no arguments", `{"name": "a"}`, `{"name": "a"}`, nil},
		{"other JSON", `{"answer": 42}`, `{"answer": 42}`, nil},
	})
}

func TestParseGeneric(t *testing.T) {
	checkParse(t, Generic, []parseCase{
		{"plain text", "It is sunny.", "It is sunny.", nil},
		{"response", ` {"response": "It is \"sunny\".\n"} `, "It is \"sunny\".\n", nil},
		{"tool_call", `{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, "", []Call{{"get_weather", `{"city":"Paris"}`}}},
		{"tool_calls", `{"tool_calls": [{"name": "a", "arguments": {}}, {"arguments": {"x": [true]}, "name": "b"}]}`, "", []Call{{"a", `{}`}, {"b", `{"x":[true]}`}}},
		{"empty tool_calls", `{"tool_calls": []}`, `{"tool_calls": []}`, nil},
		{"response not a string", `{"response": 1}`, `{"response": 1}`, nil},
		{"two keys", `{"response": "x", "tool_call": {"name": "a", "arguments": {}}}`, `{"response": "x", "tool_call": {"name": "a", "arguments": {}}}`, nil},
		{"parameters is not Generic's key", `{"tool_call": {"name": "a", "parameters": {}}}`, `{"tool_call": {"name": "a", "parameters": {}}}`, nil},
		{"trailing text", `{"response": "x"} and more`, `{"response": "x"} and more`, nil},
		{"malformed", `{"tool_call": {"name": "a", "arguments": {}}`, `{"tool_call": {"name": "a", "arguments": {}}`, nil},
	})
}

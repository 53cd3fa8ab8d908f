package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/toolcall"
)

// testTools are two function tools with parameter schemas: one whose only
// valid arguments are {"success": true} (as llama.cpp's tests use), one
// taking a string location, of at most 16 characters: the synthetic
// model writes random text, and a string with no bound rarely ends within
// the tokens an answer has.
var testTools = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "succeed", "description": "report success",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"success": map[string]any{"type": "boolean", "const": true}}, "required": []string{"success"}}}},
	{"type": "function", "function": map[string]any{"name": "get_weather", "description": "the weather at a place",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string", "maxLength": 16}}, "required": []string{"location"}}}},
}

// toolValidators compiles each test tool's parameters schema with a JSON
// schema validator written apart from the grammar converter.
func toolValidators(t *testing.T) map[string]*validator.Schema {
	t.Helper()
	out := map[string]*validator.Schema{}
	for _, tool := range testTools {
		fn := tool["function"].(map[string]any)
		raw, err := json.Marshal(fn["parameters"])
		require.NoError(t, err)
		doc, err := validator.UnmarshalJSON(bytes.NewReader(raw))
		require.NoError(t, err)
		c := validator.NewCompiler()
		url := "mem://" + fn["name"].(string) + ".json"
		require.NoError(t, c.AddResource(url, doc))
		s, err := c.Compile(url)
		require.NoError(t, err)
		out[fn["name"].(string)] = s
	}
	return out
}

// toolCallOut is one call as an answer wrote it.
type toolCallOut struct {
	ID, Name, Arguments string
}

// toolAnswer is one sample's answer, however the endpoint wrote it:
// content (nil when null or never sent), calls and finish reason.
type toolAnswer struct {
	Content *string
	Calls   []toolCallOut
	Finish  string
}

// chatBody is a sampled chat request asking about the weather.
func chatBody(seed int, extra map[string]any) map[string]any {
	b := map[string]any{"messages": []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}},
		"temperature": 1, "seed": seed, "max_tokens": 160}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// chatAnswers posts body (streamed or not, as it says) and returns each
// sample's answer; a stream's deltas are put back together.
func chatAnswers(t *testing.T, url string, body map[string]any) []toolAnswer {
	t.Helper()
	var out []toolAnswer
	at := func(i int) *toolAnswer {
		for len(out) <= i {
			out = append(out, toolAnswer{})
		}
		return &out[i]
	}
	type call struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type msg struct {
		Content   *string `json:"content"`
		ToolCalls []call  `json:"tool_calls"`
	}
	type resp struct {
		Choices []struct {
			Index        int     `json:"index"`
			Message      *msg    `json:"message"`
			Delta        *msg    `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if s, _ := body["stream"].(bool); !s {
		status, raw := post(t, url+"/v1/chat/completions", body)
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var r resp
		require.NoError(t, json.Unmarshal(raw, &r), "%s", raw)
		for _, c := range r.Choices {
			a := at(c.Index)
			a.Content, a.Finish = c.Message.Content, *c.FinishReason
			for _, k := range c.Message.ToolCalls {
				require.Nil(t, k.Index, "a whole answer's calls have no index")
				require.Equal(t, "function", k.Type)
				a.Calls = append(a.Calls, toolCallOut{k.ID, k.Function.Name, k.Function.Arguments})
			}
		}
		return out
	}
	for _, ev := range stream(t, url+"/v1/chat/completions", body) {
		if ev == "[DONE]" {
			continue
		}
		var r resp
		require.NoError(t, json.Unmarshal([]byte(ev), &r), ev)
		for _, c := range r.Choices {
			a := at(c.Index)
			if c.FinishReason != nil {
				a.Finish = *c.FinishReason
			}
			if c.Delta == nil {
				continue
			}
			if c.Delta.Content != nil && *c.Delta.Content != "" {
				s := ""
				if a.Content != nil {
					s = *a.Content
				}
				s += *c.Delta.Content
				a.Content = &s
			}
			for _, k := range c.Delta.ToolCalls {
				require.NotNil(t, k.Index, "a delta's call has its index: %s", ev)
				require.Equal(t, len(a.Calls), *k.Index, "calls come whole, in order: %s", ev)
				require.Equal(t, "function", k.Type)
				a.Calls = append(a.Calls, toolCallOut{k.ID, k.Function.Name, k.Function.Arguments})
			}
		}
	}
	return out
}

// requireValidCall fails unless c names one of the test tools (want, when
// not "") and its arguments validate against that tool's schema.
func requireValidCall(t *testing.T, vs map[string]*validator.Schema, c toolCallOut, want string, what string) {
	t.Helper()
	s, ok := vs[c.Name]
	require.True(t, ok, "%s: call of %q, not a tool", what, c.Name)
	if want != "" {
		require.Equal(t, want, c.Name, what)
	}
	doc, err := validator.UnmarshalJSON(strings.NewReader(c.Arguments))
	require.NoError(t, err, "%s: arguments %q are not JSON", what, c.Arguments)
	require.NoError(t, s.Validate(doc), "%s: arguments %s", what, c.Arguments)
	require.NotEmpty(t, c.ID, what)
}

// TestToolChoiceRequiredMakesValidCalls: with tool_choice "required" or
// a named function, every sampled answer is calls only, of the tools
// allowed, with arguments a schema validator accepts; one call unless
// parallel_tool_calls. In each format: the built-in template's (Generic),
// Qwen3's (Hermes) and a Llama-3.1 tools template's (Llama3).
func TestToolChoiceRequiredMakesValidCalls(t *testing.T) {
	for _, f := range []struct {
		name, template string
		want           toolcall.Format
	}{
		{"generic", "", toolcall.Generic},
		{"hermes", qwen3Template(t), toolcall.Hermes},
		{"llama3", readText(t, "../toolcall/testdata/llama3-tools.jinja"), toolcall.Llama3},
	} {
		t.Run(f.name, func(t *testing.T) {
			tm := loadTestModel(t)
			if f.template != "" {
				require.NoError(t, tm.tok.SetChatTemplate(f.template))
			}
			require.Equal(t, f.want, toolcall.Detect(tm.tok.ChatTemplate()))
			ts := startServer(t, tm, toolEngineConfig(), Options{})
			requiredCalls(t, ts)
		})
	}
}

// requiredCalls is TestToolChoiceRequiredMakesValidCalls on one server.
func requiredCalls(t *testing.T, ts *testServer) {
	vs := toolValidators(t)
	named := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
	for _, c := range []struct {
		name     string
		choice   any
		parallel bool
		want     string
	}{
		{"required", "required", false, ""},
		{"named", named, false, "get_weather"},
		{"required parallel", "required", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			names, most := map[string]bool{}, 0
			for seed := range 25 {
				body := chatBody(seed, map[string]any{"tools": testTools, "tool_choice": c.choice, "parallel_tool_calls": c.parallel})
				if c.parallel {
					body["max_tokens"] = 1100 // room for several calls: the grammar lets the answer add more
				}
				a := chatAnswers(t, ts.url, body)
				require.Len(t, a, 1)
				what := fmt.Sprintf("seed %d", seed)
				assert.Equal(t, "tool_calls", a[0].Finish, what)
				assert.True(t, a[0].Content == nil || *a[0].Content == "", "%s: content %q", what, deref(a[0].Content))
				if c.parallel {
					require.NotEmpty(t, a[0].Calls, what)
				} else {
					require.Len(t, a[0].Calls, 1, what)
				}
				most = max(most, len(a[0].Calls))
				ids := map[string]bool{}
				for _, k := range a[0].Calls {
					requireValidCall(t, vs, k, c.want, what)
					require.False(t, ids[k.ID], "%s: id %s twice", what, k.ID)
					ids[k.ID] = true
					names[k.Name] = true
				}
			}
			t.Logf("tools called: %v; at most %d calls in an answer", names, most)
			if c.parallel {
				assert.Greater(t, most, 1, "parallel_tool_calls lets an answer make several calls")
			}
		})
	}
}

// toolEngineConfig is the tests' engine with room for the tools'
// description in the prompt and a call after it.
func toolEngineConfig() engine.Config {
	c := engineConfig(false)
	c.MaxContext = 2048
	c.NumBlocks = 4096
	return c
}

// TestToolCallsStreamAsAnswered: a streamed answer put back together is
// the same answer, content and calls, as the same request unstreamed, in
// the Generic format and in Hermes (where content may precede a call).
func TestToolCallsStreamAsAnswered(t *testing.T) {
	for _, template := range []string{"", qwen3Template(t)} {
		tm := loadTestModel(t)
		if template != "" {
			require.NoError(t, tm.tok.SetChatTemplate(template))
		}
		streamAsAnswered(t, startServer(t, tm, toolEngineConfig(), Options{}))
	}
}

// streamAsAnswered is TestToolCallsStreamAsAnswered on one server.
func streamAsAnswered(t *testing.T, ts *testServer) {
	for _, choice := range []string{"required", "auto"} {
		for seed := range 6 {
			for _, parallel := range []bool{false, true} {
				extra := map[string]any{"tools": testTools, "tool_choice": choice, "parallel_tool_calls": parallel, "n": 2, "logprobs": true}
				whole := chatAnswers(t, ts.url, chatBody(seed, extra))
				extra["stream"] = true
				streamed := chatAnswers(t, ts.url, chatBody(seed, extra))
				require.Len(t, streamed, len(whole))
				for i := range whole {
					what := fmt.Sprintf("%s seed %d parallel %v sample %d", choice, seed, parallel, i)
					assert.Equal(t, whole[i].Finish, streamed[i].Finish, what)
					assert.Equal(t, deref(whole[i].Content), deref(streamed[i].Content), what)
					require.Len(t, streamed[i].Calls, len(whole[i].Calls), what)
					for k := range whole[i].Calls {
						assert.Equal(t, whole[i].Calls[k].Name, streamed[i].Calls[k].Name, what)
						assert.Equal(t, whole[i].Calls[k].Arguments, streamed[i].Calls[k].Arguments, what)
					}
				}
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestToolChoiceAutoAndNone: "auto" does not constrain, and the answer is
// what toolcall.Parse makes of the text the model wrote (read from the
// same prompt, rendered by /apply-template and sent as a completion,
// which nothing parses). "none" and no tools never give tool_calls.
func TestToolChoiceAutoAndNone(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, toolEngineConfig(), Options{})
	for seed := range 25 {
		what := fmt.Sprintf("seed %d", seed)
		body := chatBody(seed, map[string]any{"tools": testTools, "tool_choice": "auto", "max_tokens": 24})
		a := chatAnswers(t, ts.url, body)
		require.Len(t, a, 1)
		// The text the model wrote for this prompt, unparsed.
		prompt := applyTemplate(t, ts.url, body)
		status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": chatIDs(tm.tok, prompt), "temperature": 1, "seed": seed, "max_tokens": 24})
		require.Equal(t, http.StatusOK, status, "%s", raw)
		var c struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(raw, &c))
		content, calls := toolcall.Parse(toolcall.Generic, c.Choices[0].Text)
		assert.Equal(t, content, deref(a[0].Content), what)
		require.Len(t, a[0].Calls, len(calls), what)
		for k := range calls {
			assert.Equal(t, calls[k].Name, a[0].Calls[k].Name, what)
			assert.Equal(t, calls[k].Arguments, a[0].Calls[k].Arguments, what)
		}
		assert.Equal(t, toolFinish(c.Choices[0].FinishReason, len(calls)), a[0].Finish, what)

		for _, extra := range []map[string]any{{"tools": testTools, "tool_choice": "none"}, {}} {
			a := chatAnswers(t, ts.url, chatBody(seed, extra))
			require.Len(t, a, 1)
			assert.Empty(t, a[0].Calls, what)
			assert.NotEqual(t, "tool_calls", a[0].Finish, what)
		}
	}
}

// TestToolChoiceNoneRendersNoTools: tool_choice "none" renders the prompt
// of a request without tools; "auto" describes them.
func TestToolChoiceNoneRendersNoTools(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, toolEngineConfig(), Options{})
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	plain := applyTemplate(t, ts.url, map[string]any{"messages": msgs})
	none := applyTemplate(t, ts.url, map[string]any{"messages": msgs, "tools": testTools, "tool_choice": "none"})
	auto := applyTemplate(t, ts.url, map[string]any{"messages": msgs, "tools": testTools})
	assert.Equal(t, plain, none)
	assert.NotEqual(t, plain, auto)
	assert.Contains(t, auto, "get_weather", "the Generic format describes the tools in the system message")
	// The description is the system message's, after what the client wrote.
	sys := applyTemplate(t, ts.url, map[string]any{"messages": append([]map[string]any{{"role": "system", "content": "Be brief."}}, msgs...), "tools": testTools})
	assert.Contains(t, sys, "Be brief.\n\n")
	assert.Equal(t, 1, strings.Count(sys, "system<|end_header_id|>"), "one system message: %q", sys)
}

// TestToolConversationRenders: an assistant's earlier call and the tool's
// result render through a template that knows them (Qwen3's), on
// /apply-template and into the prompt a chat request runs.
func TestToolConversationRenders(t *testing.T) {
	tm := loadTestModel(t)
	require.NoError(t, tm.tok.SetChatTemplate(qwen3Template(t)))
	ts := startServer(t, tm, toolEngineConfig(), Options{})
	msgs := []map[string]any{
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"location": "Paris"}`}}}},
		{"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny, 21C"},
	}
	body := map[string]any{"messages": msgs, "tools": testTools}
	prompt := applyTemplate(t, ts.url, body)
	_, rest, ok := strings.Cut(prompt, "<|im_start|>assistant\n<tool_call>\n")
	require.True(t, ok, "the call is rendered: %q", prompt)
	call, rest, ok := strings.Cut(rest, "\n</tool_call>")
	require.True(t, ok, prompt)
	assert.JSONEq(t, `{"name": "get_weather", "arguments": {"location": "Paris"}}`, call, "arguments as an object, not a string")
	assert.Contains(t, rest, "<tool_response>\nsunny, 21C\n</tool_response>")
	assert.Contains(t, prompt, `"name":"succeed"`, "the tools are in the template's system message")

	// The chat request runs that prompt: its verbose answer shows it, after
	// the BOS the tokenizer puts before a prompt (chatIDs).
	body["max_tokens"], body["verbose"] = 1, true
	status, raw := post(t, ts.url+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var r struct {
		Verbose chatVerbose `json:"__verbose"`
	}
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Equal(t, "<|begin_of_text|>"+prompt, r.Verbose.Prompt)
}

// TestToolFieldsRefusals: malformed tool fields and messages are 400s
// naming the field.
func TestToolFieldsRefusals(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, toolEngineConfig(), Options{})
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	withCalls := func(calls any) []map[string]any {
		return []map[string]any{{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": calls},
			{"role": "tool", "tool_call_id": "c", "content": "r"}}
	}
	for _, c := range []struct {
		name  string
		body  map[string]any
		param string
		msg   string
	}{
		{"tools not an array", map[string]any{"tools": map[string]any{"type": "function"}}, "tools", "array"},
		{"tool without name", map[string]any{"tools": []map[string]any{{"type": "function", "function": map[string]any{"description": "x"}}}}, "tools[0].function.name", "tools[0].function.name"},
		{"unknown function", map[string]any{"tools": testTools, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "nope"}}}, "tool_choice.function.name", "nope"},
		{"required without tools", map[string]any{"tool_choice": "required"}, "tool_choice", "required"},
		{"tools and grammar", map[string]any{"tools": testTools, "grammar": `root ::= "x"`}, "grammar", "tools cannot be combined with grammar"},
		{"tools and json_schema", map[string]any{"tools": testTools, "tool_choice": "required", "json_schema": map[string]any{"type": "object"}}, "json_schema", "tools cannot be combined with json_schema"},
		{"tools and response_format", map[string]any{"tools": testTools, "response_format": map[string]any{"type": "json_object"}}, "response_format", "tools cannot be combined"},
		{"tool_calls not an array", map[string]any{"messages": withCalls(map[string]any{})}, "messages[1].tool_calls", "array"},
		{"tool call without name", map[string]any{"messages": withCalls([]map[string]any{{"type": "function", "function": map[string]any{"arguments": "{}"}}})}, "messages[1].tool_calls[0].function.name", "required"},
		{"tool call arguments not JSON", map[string]any{"messages": withCalls([]map[string]any{{"type": "function", "function": map[string]any{"name": "f", "arguments": "{oops"}}})}, "messages[1].tool_calls[0].function.arguments", "JSON object"},
		{"tool call of another type", map[string]any{"messages": withCalls([]map[string]any{{"type": "code", "function": map[string]any{"name": "f"}}})}, "messages[1].tool_calls[0].type", "function"},
		{"tool calls on a user message", map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi", "tool_calls": []map[string]any{{"function": map[string]any{"name": "f"}}}}}}, "messages[0].tool_calls", "assistant"},
	} {
		body := map[string]any{"messages": msgs, "max_tokens": 1}
		for k, v := range c.body {
			body[k] = v
		}
		for _, path := range []string{"/v1/chat/completions", "/apply-template"} {
			if path == "/apply-template" && strings.HasPrefix(c.name, "tools and ") {
				continue // nothing is generated there, nothing to constrain
			}
			status, raw := post(t, ts.url+path, body)
			require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", c.name, path, raw)
			var e struct{ Error apiError }
			require.NoError(t, json.Unmarshal(raw, &e))
			assert.Equal(t, c.param, e.Error.Param, "%s %s: %s", c.name, path, raw)
			assert.Contains(t, e.Error.Message, c.msg, "%s %s", c.name, path)
		}
	}
	// tool_choice "none" leaves grammar free to constrain the answer.
	status, raw := post(t, ts.url+"/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 4, "tools": testTools, "tool_choice": "none", "grammar": `root ::= "yes"`})
	require.Equal(t, http.StatusOK, status, "%s", raw)
	assert.Contains(t, string(raw), `"content":"yes"`)
}

// TestToolRequestLeavesOthersAlone: a free request's answer is the same
// whether or not a tools-required request runs beside it in the engine,
// with the prefix cache on.
func TestToolRequestLeavesOthersAlone(t *testing.T) {
	tm := loadTestModel(t)
	cfg := toolEngineConfig()
	cached := engineConfig(true)
	cfg.PrefixCache = cached.PrefixCache
	ts := startServer(t, tm, cfg, Options{})
	free := chatBody(3, map[string]any{"max_tokens": 32, "ignore_eos": true, "logprobs": true})
	alone := chatAnswers(t, ts.url, free)
	for round := range 3 {
		var wg sync.WaitGroup
		var beside []toolAnswer
		wg.Add(2)
		go func() {
			defer wg.Done()
			beside = chatAnswers(t, ts.url, free)
		}()
		go func() {
			defer wg.Done()
			a := chatAnswers(t, ts.url, chatBody(round, map[string]any{"tools": testTools, "tool_choice": "required"}))
			assert.Len(t, a[0].Calls, 1)
		}()
		wg.Wait()
		assert.Equal(t, alone, beside, "round %d", round)
	}
}

// qwen3Template is the Qwen3 chat template, which renders tools, calls
// and tool results.
func qwen3Template(t *testing.T) string {
	t.Helper()
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	readJSON(t, "../tokenizer/testdata/qwen3/tokenizer_config.json", &cfg)
	require.NotEmpty(t, cfg.ChatTemplate)
	return cfg.ChatTemplate
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err)
	return string(b)
}

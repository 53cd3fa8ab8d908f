package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/tokenizer"
)

// llama3Header is the header that opens the assistant's turn in the
// built-in llama3 format.
const llama3Header = "<|start_header_id|>assistant<|end_header_id|>\n\n"

// llama3Model is the test model with the built-in llama3 chat format, whose
// turns are easy to see in a prompt.
func llama3Model(t *testing.T) testModel {
	t.Helper()
	tm := loadTestModel(t)
	src, ok := tokenizer.BuiltinChatTemplate("llama3")
	require.True(t, ok)
	require.NoError(t, tm.tok.SetChatTemplate(src))
	return tm
}

// applyTemplate posts body to /apply-template and returns the prompt.
func applyTemplate(t *testing.T, url string, body map[string]any) string {
	t.Helper()
	status, raw := post(t, url+"/apply-template", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var out struct{ Prompt string }
	require.NoError(t, json.Unmarshal(raw, &out))
	return out.Prompt
}

// chatPromptTokens posts a greedy chat request and returns its
// prompt_tokens and the answer's text.
func chatPromptTokens(t *testing.T, url string, body map[string]any) (int, string) {
	t.Helper()
	body["max_tokens"], body["temperature"] = 6, 0
	status, raw := post(t, url+"/v1/chat/completions", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var out struct {
		Choices []struct {
			Message struct{ Content string }
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &out))
	require.Len(t, out.Choices, 1)
	return out.Usage.PromptTokens, out.Choices[0].Message.Content
}

// withBOS is the prompt ids of a rendered chat whose template writes no
// BOS: the tokenizer's BOS, then the text's ids, as llama-server encodes
// it (the synthetic tokenizer puts BOS before a prompt).
func withBOS(tm testModel, rendered string) []int32 {
	bos, ok := tm.tok.BOS()
	if !ok {
		panic("the test model has no BOS")
	}
	return append([]int32{bos}, tm.tok.Encode(rendered)...)
}

var userTurn = []map[string]any{{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}}

func TestAddGenerationPromptFalseRendersNoAssistantHeader(t *testing.T) {
	tm := llama3Model(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	with := applyTemplate(t, ts.url, map[string]any{"messages": userTurn})
	without := applyTemplate(t, ts.url, map[string]any{"messages": userTurn, "add_generation_prompt": false})
	assert.True(t, strings.HasSuffix(with, llama3Header), "default: the assistant's header ends the prompt: %q", with)
	assert.NotContains(t, without, "assistant", "add_generation_prompt false: no assistant header")
	assert.Equal(t, with, without+llama3Header)

	// /v1/chat/completions renders the same prompts.
	n, _ := chatPromptTokens(t, ts.url, map[string]any{"messages": userTurn, "add_generation_prompt": false})
	assert.Equal(t, len(withBOS(tm, without)), n)
	n, _ = chatPromptTokens(t, ts.url, map[string]any{"messages": userTurn})
	assert.Equal(t, len(withBOS(tm, with)), n)
}

func TestAssistantPrefillIsContinued(t *testing.T) {
	tm := llama3Model(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	prefilled := append(append([]map[string]any{}, userTurn...), map[string]any{"role": "assistant", "content": "Whill"})
	head := applyTemplate(t, ts.url, map[string]any{"messages": userTurn})
	want := head + "Whill" // left open: no end of turn, no second header
	assert.Equal(t, want, applyTemplate(t, ts.url, map[string]any{"messages": prefilled}))
	parts := append(append([]map[string]any{}, userTurn...), map[string]any{"role": "assistant", "content": []map[string]string{{"type": "text", "text": "Wh"}, {"type": "text", "text": "ill"}}})
	assert.Equal(t, head+"Wh\n\nill", applyTemplate(t, ts.url, map[string]any{"messages": parts}), "text parts of a prefill, joined by a blank line as llama-server joins them")
	explicit := map[string]any{"messages": prefilled, "continue_final_message": true, "add_generation_prompt": false}
	assert.Equal(t, want, applyTemplate(t, ts.url, explicit), "continue_final_message is the same prefill")

	// The chat answer is only the continuation: what the model writes
	// after the prefilled prompt, as /v1/completions gives it for the
	// same token ids.
	n, text := chatPromptTokens(t, ts.url, map[string]any{"messages": prefilled})
	ids := withBOS(tm, want)
	assert.Equal(t, len(ids), n)
	status, raw := post(t, ts.url+"/v1/completions", map[string]any{"prompt": ids, "max_tokens": 6, "temperature": 0})
	require.Equal(t, http.StatusOK, status, string(raw))
	var plain struct{ Choices []struct{ Text string } }
	require.NoError(t, json.Unmarshal(raw, &plain))
	require.Len(t, plain.Choices, 1)
	assert.Equal(t, plain.Choices[0].Text, text)
	assert.NotContains(t, text, "Whill", "the prefill is not repeated in the answer")
}

func TestChatTemplateRefusals(t *testing.T) {
	tm := llama3Model(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	two := append(append([]map[string]any{}, userTurn...), map[string]any{"role": "assistant", "content": "a"}, map[string]any{"role": "assistant", "content": "b"})
	last := append(append([]map[string]any{}, userTurn...), map[string]any{"role": "assistant", "content": "a"})
	for _, c := range []struct {
		name  string
		body  map[string]any
		param string
		msg   string
	}{
		{"two trailing assistant messages", map[string]any{"messages": two}, "messages", "Cannot have 2 or more assistant messages at the end of the list."},
		{"continue_final_message with the default add_generation_prompt", map[string]any{"messages": last, "continue_final_message": true}, "add_generation_prompt", "Cannot set both add_generation_prompt and continue_final_message to true."},
		{"continue_final_message after a user message", map[string]any{"messages": userTurn, "continue_final_message": true, "add_generation_prompt": false}, "continue_final_message", "last message is the user's"},
		{"continue_final_message of reasoning", map[string]any{"messages": last, "continue_final_message": "reasoning_content", "add_generation_prompt": false}, "continue_final_message", "not supported"},
		{"continue_final_message of another kind", map[string]any{"messages": last, "continue_final_message": 3, "add_generation_prompt": false}, "continue_final_message", "must be true, false"},
		{"enable_thinking as a string", map[string]any{"messages": userTurn, "chat_template_kwargs": map[string]any{"enable_thinking": "false"}}, "chat_template_kwargs.enable_thinking", `invalid type for "enable_thinking" (expected boolean, got string)`},
	} {
		for _, path := range []string{"/apply-template", "/v1/chat/completions"} {
			status, raw := post(t, ts.url+path, c.body)
			require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", c.name, path, raw)
			var e struct {
				Error struct{ Message, Param string }
			}
			require.NoError(t, json.Unmarshal(raw, &e))
			assert.Equal(t, c.param, e.Error.Param, c.name)
			assert.Contains(t, e.Error.Message, c.msg, c.name)
		}
	}
}

func TestChatTemplateKwargsAndToolsReachTheTemplate(t *testing.T) {
	tm := loadTestModel(t)
	require.NoError(t, tm.tok.SetChatTemplate(`{% if not enable_thinking %}[no thinking]{% endif %}{% if tools is not none %}[{{ tools | length }} tools: {{ tools[0].function.name }}]{% endif %}{{ messages[-1].content }}`))
	tm.tok.SetChatTemplateVars(map[string]any{"enable_thinking": true})
	ts := startServer(t, tm, engineConfig(false), Options{})
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	assert.Equal(t, "hi", applyTemplate(t, ts.url, map[string]any{"messages": msgs}))
	assert.Equal(t, "[no thinking]hi", applyTemplate(t, ts.url, map[string]any{"messages": msgs, "chat_template_kwargs": map[string]any{"enable_thinking": false}}))
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "lookup"}}}
	assert.Equal(t, "[1 tools: lookup]hi", applyTemplate(t, ts.url, map[string]any{"messages": msgs, "tools": tools}))
}

func TestVerboseShowsTheRenderedPrompt(t *testing.T) {
	tm := llama3Model(t)
	verbose := func(url string, body map[string]any) (string, bool) {
		t.Helper()
		body["max_tokens"] = 2
		status, raw := post(t, url+"/v1/chat/completions", body)
		require.Equal(t, http.StatusOK, status, string(raw))
		var out struct {
			Verbose *struct{ Prompt string } `json:"__verbose"`
		}
		require.NoError(t, json.Unmarshal(raw, &out))
		if out.Verbose == nil {
			return "", false
		}
		return out.Verbose.Prompt, true
	}
	ts := startServer(t, tm, engineConfig(false), Options{})
	bos, _ := tm.tok.BOS()
	want := string(tm.tok.Piece(bos)) + applyTemplate(t, ts.url, map[string]any{"messages": userTurn})
	got, ok := verbose(ts.url, map[string]any{"messages": userTurn, "verbose": true})
	assert.True(t, ok, "verbose: true asks for __verbose")
	assert.Equal(t, want, got)
	_, ok = verbose(ts.url, map[string]any{"messages": userTurn, "verbose": false})
	assert.False(t, ok, "no __verbose unless asked")

	all := startServer(t, tm, engineConfig(false), Options{Verbose: true})
	got, ok = verbose(all.url, map[string]any{"messages": userTurn})
	assert.True(t, ok, "Options.Verbose: every chat answer has it")
	assert.Equal(t, want, got)
}

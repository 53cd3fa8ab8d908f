package server

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endpointRules pairs each checked endpoint with its request struct, its
// lists and a small valid body.
var endpointRules = []struct {
	path  string
	req   any
	rules *fieldRules
	body  map[string]any
}{
	{"/v1/completions", completionRequest{}, &completionFields, map[string]any{"prompt": []int{1, 2, 3}, "max_tokens": 1}},
	{"/v1/chat/completions", chatRequest{}, &chatFields, map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 1}},
	{"/completion", llamaRequest{}, &llamaCompletionFields, map[string]any{"prompt": []int{1, 2, 3}, "n_predict": 1}},
	{"/tokenize", tokenizeRequest{}, &tokenizeFields, map[string]any{"content": "hi"}},
	{"/detokenize", detokenizeRequest{}, &detokenizeFields, map[string]any{"tokens": []int{1, 2}}},
	{"/apply-template", applyTemplateRequest{}, &chatFields, map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}}},
}

// TestEveryRequestFieldIsListed: the implemented list of each endpoint is
// exactly its request struct's fields, and no field is in two lists, so a
// field added to a struct without a line in fields.go fails here.
func TestEveryRequestFieldIsListed(t *testing.T) {
	for _, ep := range endpointRules {
		own := slices.Sorted(maps.Keys(jsonFields(reflect.TypeOf(ep.req))))
		impl := slices.Clone(ep.rules.implemented)
		sort.Strings(impl)
		assert.Equal(t, own, impl, "%s: the request struct's fields and fields.go's implemented list", ep.path)
		seen := map[string]string{}
		for list, names := range map[string][]string{"implemented": ep.rules.implemented, "accepted": ep.rules.accepted, "refused": refusedNames(ep.rules)} {
			for _, n := range names {
				if other, dup := seen[n]; dup {
					t.Errorf("%s: %s is both %s and %s", ep.path, n, other, list)
				}
				seen[n] = list
			}
		}
	}
}

// TestRefusedFieldsAreNamed: each refused field with a value that asks for
// something gets a 400 naming it, through the wire.
func TestRefusedFieldsAreNamed(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, ep := range endpointRules {
		for _, name := range refusedNames(ep.rules) {
			body := maps.Clone(ep.body)
			body[name] = 7 // no field's neutral value
			status, raw := post(t, ts.url+ep.path, body)
			require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", ep.path, name, raw)
			var e struct{ Error apiError }
			require.NoError(t, json.Unmarshal(raw, &e))
			assert.Equal(t, "not_supported", e.Error.Code, "%s %s", ep.path, name)
			assert.Equal(t, name, e.Error.Param, "%s %s", ep.path, name)
			assert.Contains(t, e.Error.Message, name+" is not supported", "%s %s", ep.path, name)
		}
	}
	// The fields the issue names, with the values clients send.
	for _, c := range []struct {
		path, field string
		value       any
	}{
		// tools and tool_choice are built (toolcalls.go); their deprecated
		// spellings are not.
		{"/v1/chat/completions", "functions", []map[string]any{{"name": "f"}}},
		{"/v1/chat/completions", "function_call", map[string]any{"name": "f"}},
		{"/v1/completions", "response_fields", []string{"content"}},
		{"/v1/completions", "post_sampling_probs", true},
		{"/v1/completions", "suffix", "end"},
		{"/tokenize", "parse_special", false}, // its zero value asks for something
	} {
		body := map[string]any{}
		for _, ep := range endpointRules {
			if ep.path == c.path {
				body = maps.Clone(ep.body)
			}
		}
		body[c.field] = c.value
		status, raw := post(t, ts.url+c.path, body)
		assert.Equal(t, http.StatusBadRequest, status, "%s %s: %s", c.path, c.field, raw)
		assert.Contains(t, string(raw), c.field+" is not supported", "%s %s", c.path, c.field)
	}
}

// TestNeutralValuesPass: a refused field at a value that asks for nothing
// (null, false, an empty list, {"type":"text"}, ...), and the extras OpenAI's
// SDKs send, are answered 200: clients that send defaults keep working.
func TestNeutralValuesPass(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, ep := range endpointRules {
		nulls, extras := maps.Clone(ep.body), maps.Clone(ep.body)
		for name, neutral := range merged(ep.rules.refused, ep.rules.only) {
			nulls[name] = nil
			if len(neutral) > 0 {
				extras[name] = json.RawMessage(neutral[len(neutral)-1])
			}
		}
		for _, name := range ep.rules.accepted {
			nulls[name] = nil
		}
		for _, body := range []map[string]any{nulls, extras} {
			status, raw := post(t, ts.url+ep.path, body)
			assert.Equal(t, http.StatusOK, status, "%s: %s", ep.path, raw)
		}
	}
	sdk := map[string]any{
		"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 1,
		"user": "u1", "metadata": map[string]string{"k": "v"}, "store": false, "logprobs": false, "top_logprobs": nil,
		"tools": []any{}, "tool_choice": "none", "response_format": map[string]string{"type": "text"},
		"stream_options": nil, "frequency_penalty": 0, "presence_penalty": 0, "logit_bias": nil, "top_k": -1,
		"an_extra_no_api_defines": 1,
	}
	status, raw := post(t, ts.url+"/v1/chat/completions", sdk)
	assert.Equal(t, http.StatusOK, status, string(raw))
}

// refusedNames lists an endpoint's refused fields, sorted.
func refusedNames(r *fieldRules) []string {
	return slices.Sorted(maps.Keys(merged(r.refused, r.only)))
}

// TestResponseFieldsKeepOnlyThosePaths: /completion's response_fields
// keeps only the paths named, each under its whole path; a path that leads
// nowhere is left out; without it the answer is whole.
func TestResponseFieldsKeepOnlyThosePaths(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	body := map[string]any{"prompt": "Hello", "n_predict": 3, "ignore_eos": true,
		"response_fields": []string{"content", "generation_settings/n_predict", "prompt", "no/such"}}
	status, raw := post(t, ts.url+"/completion", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	var r map[string]any
	require.NoError(t, json.Unmarshal(raw, &r))
	assert.Len(t, r, 3, string(raw))
	assert.Equal(t, 3.0, r["generation_settings/n_predict"])
	assert.IsType(t, "", r["content"])
	assert.Contains(t, r, "prompt")

	delete(body, "response_fields")
	status, raw = post(t, ts.url+"/completion", body)
	require.Equal(t, http.StatusOK, status, string(raw))
	assert.Contains(t, string(raw), `"generation_settings":`)
}

// TestNPredictOnV1: llama-server's n_predict works on the /v1 endpoints as
// there: it sets the output length, over max_tokens; -1 leaves the default.
// On /completion, max_tokens is n_predict's other name.
func TestNPredictOnV1(t *testing.T) {
	tm := loadTestModel(t)
	ts := startServer(t, tm, engineConfig(false), Options{})
	for _, c := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{"n_predict": 2}, 2},
		{map[string]any{"n_predict": 3, "max_tokens": 5}, 3},
		{map[string]any{"n_predict": -1, "max_tokens": 4}, 4},
		{map[string]any{"n_predict": -1}, 16},
		{map[string]any{"max_tokens": 2, "path": "/completion"}, 2},
		{map[string]any{"max_tokens": 2, "n_predict": 3, "path": "/completion"}, 3},
	} {
		body := maps.Clone(c.body)
		body["prompt"], body["ignore_eos"] = []int{1, 2, 3}, true
		path, _ := body["path"].(string)
		delete(body, "path")
		if path == "/completion" { // llama-server's max_tokens there, n_predict's other name
			status, raw := post(t, ts.url+path, body)
			require.Equal(t, http.StatusOK, status, string(raw))
			var r llamaResponse
			require.NoError(t, json.Unmarshal(raw, &r))
			assert.Equal(t, c.want, r.TokensPredicted, "%v", c.body)
			continue
		}
		status, raw := post(t, ts.url+"/v1/completions", body)
		require.Equal(t, http.StatusOK, status, string(raw))
		var r completionResponse
		require.NoError(t, json.Unmarshal(raw, &r))
		assert.Equal(t, c.want, r.Usage.CompletionTokens, "%v", c.body)
	}
}

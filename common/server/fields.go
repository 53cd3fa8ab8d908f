package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Every field that OpenAI's API or llama-server define for an endpoint is
// in one of three lists here, so that none is silently ignored:
//
//   - implemented: decoded into the endpoint's request struct and obeyed
//     (a test checks that each struct field is listed, and only those);
//   - accepted: no effect on the output here, by design (a user id, a
//     storage flag, a knob of a sampler that is itself refused unless off);
//   - refused: not built; a body that gives one a value other than its
//     neutral ones (null, false, 0, "", [], {} and the values listed with
//     it) gets a 400 naming it.
//
// A field no API defines is ignored, as llama-server and OpenAI's servers
// do: SDKs add their own extras, and refusing them would break clients.

// fieldRules is one endpoint's lists.
type fieldRules struct {
	implemented []string
	accepted    []string
	// refused maps a field to the values it may have besides the zero
	// ones, as JSON.
	refused map[string][]string
	// only are refused fields whose neutral values are just those listed
	// (and null): their zero value asks for something.
	only map[string][]string
}

// llamaSamplers are llama-server's generation fields that the engine does
// not have (its sampler is temperature, top-p and logit bias): each is
// refused unless it leaves the output as it is.
var llamaSamplers = map[string][]string{
	// Samplers and penalties.
	"min_p": nil, "typical_p": {"1"}, "top_n_sigma": {"-1"},
	"xtc_probability": nil, "dynatemp_range": nil, "repeat_penalty": {"1"},
	"frequency_penalty": nil, "presence_penalty": nil, "dry_multiplier": nil,
	"mirostat": nil, "adaptive_target": {"-1"}, "samplers": nil,
	// Constrained output: grammar and json_schema are built
	// (structured.go), lazy grammars (triggered by a token) are not.
	"grammar_lazy": nil, "grammar_triggers": nil, "preserved_tokens": nil,
	// Context and length: no context shift, no time limit.
	"n_indent": nil, "n_keep": nil, "n_discard": nil, "t_max_predict_ms": nil,
	// Reasoning budgets, adapters, several completions per prompt.
	"reasoning_budget_tokens": {"-1"}, "reasoning_control": nil, "lora": nil, "n_cmpl": {"1"},
}

// llamaAccepted are llama-server's fields that change nothing here: knobs
// of refused samplers (they act only when that sampler is on), and hints
// about speed or the shape of timings.
var llamaAccepted = []string{
	"dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers",
	"mirostat_tau", "mirostat_eta", "xtc_threshold", "dynatemp_exponent",
	"repeat_last_n", "min_keep", "t_max_prompt_ms",
	"speculative.n_max", "speculative.n_min", "speculative.p_min", "id_task",
	"return_tokens", "chat_format", "reasoning_in_content", "thinking_forced_open",
	"sse_ping_interval", "n_cache_reuse", "backend_sampling", "adaptive_decay",
	"speculative.type", "speculative.ngram_size_n", "speculative.ngram_size_m", "speculative.ngram_min_hits",
	"reasoning_budget_start_tag", "reasoning_budget_end_tags", "reasoning_budget_message",
	"generation_prompt", "parse_tool_calls", "chat_parser",
	// The built-in models do not reason: there is nothing to split off.
	"reasoning_format",
}

// openAIAccepted are OpenAI's fields that do not change the output: who
// asks, what to store, and routing hints; and llama-server's cache_prompt,
// which its /v1 endpoints take too (one prefix cache serves every request
// here, on with --prefix-caching).
var openAIAccepted = []string{"user", "metadata", "store", "service_tier", "safety_identifier", "prompt_cache_key", "cache_prompt"}

// llamaOnV1 are llama-server's /completion fields that its /v1 endpoints
// also read, with a name of their own here.
var llamaOnV1 = map[string][]string{"n_probs": nil}

// insteadOf names, in a refusal, the field that does what was asked.
var insteadOf = map[string]string{"n_probs": "logprobs"}

var completionFields = fieldRules{
	implemented: []string{"model", "prompt", "max_tokens", "max_completion_tokens", "n_predict", "temperature", "top_p", "top_k", "n", "seed", "stop",
		"stream", "stream_options", "logprobs", "echo", "logit_bias",
		"ignore_eos", "return_token_ids", "cache_salt", "id_slot", "timings_per_token", "grammar", "json_schema", "response_format"},
	accepted: concat(openAIAccepted, llamaAccepted),
	refused: merged(llamaSamplers, llamaOnV1, map[string][]string{"suffix": nil, "best_of": {"1"}, "response_fields": nil, "post_sampling_probs": nil,
		"verbose": nil}), // the debug output is built on chat only
}

var chatFields = fieldRules{
	implemented: []string{"model", "messages", "max_tokens", "max_completion_tokens", "n_predict", "temperature", "top_p", "top_k",
		"n", "seed", "stop", "stream", "stream_options", "logprobs", "top_logprobs", "logit_bias",
		"ignore_eos", "return_token_ids", "cache_salt", "id_slot", "return_progress",
		"add_generation_prompt", "continue_final_message", "chat_template_kwargs", "verbose", "timings_per_token", "grammar", "json_schema", "response_format",
		"tools", "tool_choice", "parallel_tool_calls"},
	accepted: concat(openAIAccepted, llamaAccepted, []string{
		"verbosity", // a hint to reasoning models: none here
	}),
	refused: merged(llamaSamplers, llamaOnV1, map[string][]string{
		// OpenAI's deprecated spelling of tools and tool_choice.
		"functions": nil, "function_call": {`"none"`, `"auto"`},
		"audio": nil, "modalities": {`["text"]`},
		"prediction": nil, "reasoning_effort": nil, "web_search_options": nil, "response_fields": nil, "post_sampling_probs": nil,
	}),
}

var llamaCompletionFields = fieldRules{
	implemented: []string{"prompt", "n_predict", "max_tokens", "temperature", "top_k", "top_p", "seed", "stop", "stream",
		"ignore_eos", "n_probs", "post_sampling_probs", "return_progress", "cache_prompt", "cache_salt", "id_slot", "logit_bias",
		"response_fields", "timings_per_token", "grammar", "json_schema"},
	accepted: llamaAccepted,
	refused:  merged(llamaSamplers, map[string][]string{"echo": nil, "verbose": nil}),
}

var detokenizeFields = fieldRules{implemented: []string{"tokens"}}

var tokenizeFields = fieldRules{
	implemented: []string{"content", "add_special", "with_pieces"},
	// Special tokens' texts are always read as the tokens (Tokenizer.Encode).
	only: map[string][]string{"parse_special": {"true"}},
}

func (completionRequest) fieldRules() *fieldRules    { return &completionFields }
func (chatRequest) fieldRules() *fieldRules          { return &chatFields }
func (applyTemplateRequest) fieldRules() *fieldRules { return &chatFields }
func (llamaRequest) fieldRules() *fieldRules         { return &llamaCompletionFields }
func (tokenizeRequest) fieldRules() *fieldRules      { return &tokenizeFields }
func (detokenizeRequest) fieldRules() *fieldRules    { return &detokenizeFields }

// fieldChecked is what a request body type implements to have decodeBody
// refuse the fields it does not implement.
type fieldChecked interface {
	fieldRules() *fieldRules
}

// checkFields reads body's top-level keys (one pass; a body that is not an
// object passes, decoding refuses it) and refuses the first refused field,
// in the body's order, that has a value other than its neutral ones. A
// field the request struct has is never refused: the struct decides.
// Keys match without regard to case, as encoding/json matches them.
func checkFields(body []byte, v any, rules *fieldRules) *apiError {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	// Map order is random: refuse the same field every time.
	at := func(k string) int { return bytes.Index(body, []byte(`"`+k+`"`)) }
	slices.SortFunc(keys, func(a, b string) int { return at(a) - at(b) })
	own := jsonFields(reflect.TypeOf(v))
	for _, k := range keys {
		name := strings.ToLower(k)
		neutral, refused := rules.refused[name]
		only, exact := rules.only[name]
		switch {
		case own[name], !refused && !exact:
			continue
		case refused && isNeutral(fields[k], neutral):
			continue
		case exact && (string(fields[k]) == "null" || isListed(fields[k], only)):
			continue
		}
		msg := name + " is not supported by this server (the field is known, but not built here); leave it out"
		if other, ok := insteadOf[name]; ok {
			msg = name + " is not supported by this server on this endpoint; send " + other
		}
		return &apiError{Status: 400, Type: "invalid_request_error", Code: "not_supported", Param: name, Message: msg}
	}
	return nil
}

// isNeutral reports whether raw is null, false, 0, "", [], {}, or equal as
// JSON to one of extra.
func isNeutral(raw json.RawMessage, extra []string) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		if !x {
			return true
		}
	case float64:
		if x == 0 {
			return true
		}
	case string:
		if x == "" {
			return true
		}
	case []any:
		if len(x) == 0 {
			return true
		}
	case map[string]any:
		if len(x) == 0 {
			return true
		}
	}
	return isListed(raw, extra)
}

// isListed reports whether raw equals, as JSON, one of values.
func isListed(raw json.RawMessage, values []string) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	for _, e := range values {
		var w any
		if json.Unmarshal([]byte(e), &w) == nil && reflect.DeepEqual(v, w) {
			return true
		}
	}
	return false
}

// jsonFields returns the lower-cased JSON names of a struct's fields, those
// of embedded structs included.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k := range jsonFields(f.Type) {
				out[k] = true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[strings.ToLower(name)] = true
		}
	}
	return out
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func merged(maps ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
